"""The parameter server over real ZeroMQ sockets on loopback: fetch/push, rejection of bad messages while it
keeps serving, call timeouts, clean shutdown."""

from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.client import BackgroundClient, ParameterClient, ServerError
from training.strategies.parameter_server.protocol import Kind, Message
from training.strategies.parameter_server.server import ParameterServer
from training.strategies.parameter_server.shards import ParameterShard

SECRET = b"per-job-secret"
ProtocolErrorOrServerError = (protocol.ProtocolError, ServerError)


@pytest.fixture
def server():
    initial = np.linspace(-1, 1, 101, dtype=np.float32)
    with ParameterServer(initial, num_shards=3, secret=SECRET, learning_rate=0.1) as running:
        yield running


def client_for(server: ParameterServer, secret: bytes = SECRET, timeout: float = 5.0) -> ParameterClient:
    return ParameterClient(server.addresses, server.bounds, secret, worker=0, timeout_seconds=timeout)


def test_fetch_returns_the_parameters_and_a_push_applies_adagrad_on_every_shard(server):
    with client_for(server) as client:
        assert np.array_equal(client.fetch(), np.linspace(-1, 1, 101, dtype=np.float32))
        gradient = np.full(101, 0.5, np.float32)
        assert client.push(gradient) == [1, 1, 1]
        reference = ParameterShard(np.linspace(-1, 1, 101, dtype=np.float32), "adagrad", learning_rate=0.1)
        reference.apply(gradient)
        assert np.allclose(client.fetch(), reference.snapshot()[0])
    assert server.statistics.pushes == 3 and server.statistics.fetches == 6
    assert server.statistics.bytes_in > 101 * 4


def test_staleness_counts_the_versions_between_fetch_and_push(server):
    with client_for(server) as slow, client_for(server) as fast:
        slow.fetch()
        fast.fetch()
        for _ in range(3):
            fast.push(np.ones(101, np.float32))
        slow.push(np.ones(101, np.float32))
    assert server.statistics.staleness[-3:] == [3, 3, 3]  # one per shard: 3 versions arrived after slow's fetch


def raw_request(address: str, frame: bytes) -> bytes:
    context = zmq.Context()
    socket = context.socket(zmq.REQ)
    socket.setsockopt(zmq.RCVTIMEO, 5000)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)
    try:
        socket.send(frame)
        return socket.recv()
    finally:
        socket.close()
        context.term()


@pytest.mark.parametrize(
    ("make_frame", "reason"),
    [
        (lambda: protocol.encode(Message(Kind.FETCH, 0, 0, 0), b"wrong-secret"), "authentication failed"),
        (lambda: b"JUNK" + protocol.encode(Message(Kind.FETCH, 0, 0, 0), SECRET)[4:], "bad magic"),
        (lambda: protocol.encode(Message(Kind.FETCH, 0, 0, 0), SECRET)[:12], "truncated message"),
        (lambda: protocol.encode(Message(Kind.PUSH, 0, 0, 0, bytes(4 * 200)), SECRET), "exceeds the limit"),
        (lambda: protocol.encode(Message(Kind.PUSH, 0, 0, 0, bytes(4 * 3), steps=1), SECRET), "gradient of 3 values"),
        (lambda: protocol.encode(Message(Kind.PUSH, 0, 0, 0, bytes(4 * 34), steps=0), SECRET), "at least one step"),
    ],
)
def test_bad_messages_get_an_error_and_the_server_keeps_serving(server, make_frame, reason):
    answer = protocol.decode(raw_request(server.addresses[0], make_frame()), SECRET, num_shards=3)
    assert answer.kind == Kind.ERROR
    assert reason in answer.payload.decode()
    with client_for(server) as client:  # still serving, parameters untouched
        assert np.array_equal(client.fetch(), np.linspace(-1, 1, 101, dtype=np.float32))
    assert server.statistics.rejected == 1


def test_a_huge_message_is_dropped_by_the_transport_and_the_server_keeps_serving(server):
    huge = protocol.encode(Message(Kind.PUSH, 0, 0, 0, bytes(4 * 100_000)), SECRET)
    with pytest.raises(zmq.Again):  # ZeroMQ's size cap closes that connection: no answer, no allocation
        raw_request(server.addresses[0], huge)
    with client_for(server) as client:
        assert client.fetch().size == 101


def test_a_client_with_the_wrong_secret_is_refused(server):
    with client_for(server, secret=b"guess") as intruder, pytest.raises(ProtocolErrorOrServerError):
        intruder.fetch()


@pytest.fixture
def silent_address():
    """A socket that accepts connections and never answers."""
    context = zmq.Context()
    silent = context.socket(zmq.ROUTER)
    silent.setsockopt(zmq.LINGER, 0)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    yield f"tcp://127.0.0.1:{port}"
    silent.close()
    context.term()


def test_a_call_to_a_silent_server_times_out_instead_of_hanging(silent_address):
    client = ParameterClient([silent_address], [(0, 4)], SECRET, worker=0, timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not answer within 0.5 s"):
        client.fetch()
    assert time.monotonic() - started < 3
    client.close()


def test_stop_ends_every_serving_thread():
    server = ParameterServer(np.zeros(10, np.float32), num_shards=2, secret=SECRET).__enter__()
    threads = list(server._threads)
    server.stop()
    assert not any(thread.is_alive() for thread in threads)


def test_background_client_pushes_and_fetches_off_the_worker_thread(server):
    client = BackgroundClient(lambda: client_for(server))
    start = client.fetch_now()
    assert np.array_equal(start, np.linspace(-1, 1, 101, dtype=np.float32))
    client.push(np.full(101, 0.5, np.float32), steps=4)
    client.request_fetch()  # queued behind the push: it sees the update
    deadline = time.monotonic() + 5
    while (fetched := client.take_fetched()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    assert fetched is not None and not np.array_equal(fetched, start)
    assert client.versions == [1, 1, 1] and server.statistics.pushes == 3
    assert server.steps_applied() == 4


def test_background_client_raises_a_failure_at_the_next_call(silent_address):
    client = BackgroundClient(lambda: ParameterClient([silent_address], [(0, 4)], SECRET, worker=0,
                                                      timeout_seconds=0.3))
    with pytest.raises(TimeoutError, match="did not answer"):
        client.fetch_now()
    with pytest.raises(TimeoutError):
        client.close()
