"""The parameter server over real ZeroMQ sockets on loopback: fetch/push, rejection of bad messages while it
keeps serving (non-finite pushes, replays, wrong shards), clipping, call timeouts, clean shutdown."""

from __future__ import annotations

import io
import math
import threading
import time

import numpy as np
import pytest
import zmq

from training.strategies import downpour, downpour_worker
from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.client import BackgroundClient, ParameterClient, ServerError
from training.strategies.parameter_server.protocol import Kind, Message
from training.strategies.parameter_server.server import ParameterServer
from training.strategies.parameter_server.shards import NonFiniteError, ParameterShard

SECRET = b"per-job-secret"
ProtocolErrorOrServerError = (protocol.ProtocolError, ServerError)


@pytest.fixture
def server():
    initial = np.linspace(-1, 1, 101, dtype=np.float32)
    with ParameterServer(initial, num_shards=3, secret=SECRET, learning_rate=0.1) as running:
        yield running


def client_for(server: ParameterServer, secret: bytes = SECRET, timeout: float = 5.0, worker: int = 0
               ) -> ParameterClient:
    return ParameterClient(server.addresses, server.bounds, secret, worker=worker, timeout_seconds=timeout)


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
    with client_for(server, worker=0) as slow, client_for(server, worker=1) as fast:
        slow.fetch()
        fast.fetch()
        for _ in range(3):
            fast.push(np.ones(101, np.float32))
        slow.push(np.ones(101, np.float32))
    assert server.statistics.staleness[-3:] == [3, 3, 3]  # one per shard: 3 versions arrived after slow's fetch


@pytest.mark.parametrize("push_as_steps", [False, True])
def test_a_push_of_several_steps_is_one_server_step_or_as_many_as_it_covers(push_as_steps):
    initial = np.linspace(-1, 1, 10, dtype=np.float32)
    with ParameterServer(initial, num_shards=2, secret=SECRET, learning_rate=0.1, max_steps_per_push=4,
                         push_as_steps=push_as_steps) as running, client_for(running) as client:
        gradient = np.full(10, 0.8, np.float32)
        assert client.push(gradient, steps=4) == [1, 1]  # one push: one version, either way
        reference = ParameterShard(initial, "adagrad", learning_rate=0.1)
        reference.apply(gradient, steps=4 if push_as_steps else 1)
        assert np.allclose(client.fetch(), reference.snapshot()[0])


def test_a_staleness_aware_server_divides_a_stale_push_by_its_staleness():
    initial = np.zeros(4, np.float32)
    with ParameterServer(initial, num_shards=1, secret=SECRET, optimizer="sgd", learning_rate=0.5,
                         staleness_aware=True) as aware:
        with client_for(aware, worker=0) as slow, client_for(aware, worker=1) as fast:
            slow.fetch()
            fast.fetch()
            for _ in range(4):  # fresh each time: fast fetches again before every push
                fast.push(np.ones(4, np.float32))
                fast.fetch()
            slow.push(np.ones(4, np.float32))  # 4 versions old: a quarter of the step
        # fast's pushes: staleness 0 (a full step, 0.5 each: -2.0); slow's: 0.5 / 4
        assert aware.parameters() == pytest.approx(np.full(4, -2.0 - 0.125))
        assert aware.statistics.staleness == [0, 0, 0, 0, 4]


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


# --- What one push may do: non-finite pushes refused, huge ones clipped, replays refused ---------------------------

INITIAL = np.linspace(-1, 1, 101, dtype=np.float32)  # the server fixture's parameters: shards of 34, 33, 34 values


def signed_push(server: ParameterServer, shard: int, gradient: np.ndarray, worker: int = 7, sequence: int = 1,
                steps: int = 1) -> bytes:
    """A push as a worker holding the job's secret signs it (what an eavesdropper could capture)."""
    return protocol.encode(Message(Kind.PUSH, shard, worker, 0, protocol.float_payload(gradient), steps, sequence),
                           SECRET)


def send(server: ParameterServer, shard: int, frame: bytes) -> Message:
    return protocol.decode(raw_request(server.addresses[shard], frame), SECRET, num_shards=len(server.shards))


def slice_of(server: ParameterServer, shard: int, value: float) -> np.ndarray:
    start, stop = server.bounds[shard]
    return np.full(stop - start, value, np.float32)


def assert_still_serving_finite_parameters(server: ParameterServer) -> np.ndarray:
    with client_for(server, worker=99) as client:
        parameters = client.fetch()
    assert np.isfinite(parameters).all()
    assert all(np.isfinite(shard.accumulator).all() for shard in server.shards)
    return parameters


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_push_is_refused_and_nothing_changes(server, bad):
    gradient = slice_of(server, 0, 0.5)
    gradient[5] = bad
    answer = send(server, 0, signed_push(server, 0, gradient))
    assert answer.kind == Kind.ERROR and "NaN or ±Inf" in answer.payload.decode()
    assert np.array_equal(assert_still_serving_finite_parameters(server), INITIAL)
    assert all(np.all(shard.accumulator == np.float32(0.1)) and shard.snapshot()[1] == 0 for shard in server.shards)
    statistics = server.statistics
    assert (statistics.rejected, statistics.non_finite_pushes, statistics.pushes) == (1, 1, 0)
    assert server.steps_applied() == 0


def test_a_huge_finite_push_is_clipped_and_leaves_every_parameter_finite_and_movable(server):
    with client_for(server) as client:
        client.fetch()
        assert client.push(np.full(101, 1e20, np.float32), steps=4) == [1, 1, 1]
        after = client.fetch()
        client.push(np.full(101, 0.5, np.float32))
        moved = client.fetch()
    assert np.isfinite(after).all() and all(np.isfinite(shard.accumulator).all() for shard in server.shards)
    assert np.all(np.abs(after - INITIAL) <= 0.1 + 1e-6)  # Adagrad on a clipped push: at most lr per parameter
    assert np.all(moved < after)  # not frozen: the next push still moves every parameter
    assert (server.statistics.clipped_pushes, server.statistics.rejected) == (3, 0)


@pytest.mark.parametrize("max_push_norm", [100.0, 0.0])
def test_a_push_whose_squares_overflow_float32_never_reaches_the_accumulators(max_push_norm):
    with ParameterServer(INITIAL, 3, SECRET, learning_rate=0.1, max_push_norm=max_push_norm) as server:
        answer = send(server, 1, signed_push(server, 1, slice_of(server, 1, 2e19)))  # (2e19)² > float32 max
        if max_push_norm:  # clipped, then applied
            assert answer.kind == Kind.ACK and server.statistics.clipped_pushes == 1
        else:  # no clipping: the update would overflow, so it is refused whole
            assert answer.kind == Kind.ERROR and "would overflow float32" in answer.payload.decode()
            assert (server.statistics.non_finite_pushes, server.statistics.rejected) == (1, 1)
            assert np.all(server.shards[1].accumulator == np.float32(0.1))
        assert_still_serving_finite_parameters(server)


def test_nan_in_one_shard_of_several_is_refused_there_and_never_sent_by_a_client(server):
    gradient = np.full(101, 0.5, np.float32)
    gradient[50] = math.nan  # in shard 1 (34..67)
    with client_for(server) as client, pytest.raises(NonFiniteError, match="1 NaN or ±Inf value"):
        client.push(gradient)
    assert server.statistics.pushes == 0  # the client checks the whole push before any shard sees its slice
    answers = [send(server, shard, signed_push(server, shard, gradient[start:stop]))
               for shard, (start, stop) in enumerate(server.bounds)]
    assert [answer.kind for answer in answers] == [Kind.ACK, Kind.ERROR, Kind.ACK]
    assert "NaN or ±Inf" in answers[1].payload.decode()
    parameters = assert_still_serving_finite_parameters(server)
    assert np.array_equal(parameters[34:67], INITIAL[34:67]) and server.shards[1].snapshot()[1] == 0
    assert (server.statistics.pushes, server.statistics.non_finite_pushes, server.statistics.rejected) == (2, 1, 1)
    assert server.steps_applied() == 0  # shard 1 applied none of those steps


def test_a_replayed_push_is_refused_and_applied_only_once(server):
    captured = [signed_push(server, shard, slice_of(server, shard, 0.5), sequence=5, steps=4) for shard in range(3)]
    first = [send(server, shard, frame) for shard, frame in enumerate(captured)]
    replayed = [send(server, shard, frame) for shard, frame in enumerate(captured)]
    assert [answer.kind for answer in first] == [Kind.ACK] * 3
    assert [answer.kind for answer in replayed] == [Kind.ERROR] * 3
    assert "sequence number 5 from worker 7 is not newer than 5" in replayed[0].payload.decode()
    assert server.steps_applied() == 4 and server.statistics.pushes == 3 and server.statistics.rejected == 3
    assert [shard.snapshot()[1] for shard in server.shards] == [1, 1, 1]
    assert_still_serving_finite_parameters(server)


def test_an_older_sequence_number_is_refused_and_a_newer_one_accepted(server):
    answers = [send(server, 0, signed_push(server, 0, slice_of(server, 0, 0.5), sequence=sequence))
               for sequence in (10, 9, 11)]
    assert [answer.kind for answer in answers] == [Kind.ACK, Kind.ERROR, Kind.ACK]
    assert answers[1].sequence == 9  # an error reply still names the request it answers
    assert server.shards[0].snapshot()[1] == 2 and server.statistics.rejected == 1


def test_another_workers_push_cannot_be_replayed_under_a_fresh_worker_number(server):
    captured = signed_push(server, 0, slice_of(server, 0, 0.5), worker=7, sequence=10)
    relabelled = captured[:10] + (8).to_bytes(2, "big") + captured[12:]  # header bytes 10-11: the worker
    assert send(server, 0, captured).kind == Kind.ACK
    for frame, reason in [(relabelled, "authentication failed"), (captured, "not newer than 10")]:
        answer = send(server, 0, frame)
        assert answer.kind == Kind.ERROR and reason in answer.payload.decode()
    # Worker 8's numbers are its own: the same number, signed by worker 8, is fresh.
    assert send(server, 0, signed_push(server, 0, slice_of(server, 0, 0.5), worker=8, sequence=10)).kind == Kind.ACK
    assert server.shards[0].snapshot()[1] == 2 and server.statistics.rejected == 2
    assert_still_serving_finite_parameters(server)


def test_a_push_for_another_shard_is_refused_and_cannot_be_readdressed(server):
    for_shard_1 = signed_push(server, 1, slice_of(server, 1, 0.5), sequence=4)
    readdressed = for_shard_1[:8] + (0).to_bytes(2, "big") + for_shard_1[10:]  # header bytes 8-9: the shard
    for frame, reason in [(for_shard_1, "message for shard 1 sent to shard 0"),
                          (readdressed, "authentication failed")]:
        answer = send(server, 0, frame)
        assert answer.kind == Kind.ERROR and reason in answer.payload.decode()
    assert [shard.snapshot()[1] for shard in server.shards] == [0, 0, 0] and server.statistics.rejected == 2
    assert send(server, 1, for_shard_1).kind == Kind.ACK  # never applied anywhere, so its own shard takes it once
    assert send(server, 1, for_shard_1).kind == Kind.ERROR
    assert_still_serving_finite_parameters(server)


def test_a_push_claiming_more_steps_than_n_push_is_refused():
    with ParameterServer(INITIAL, 3, SECRET, max_steps_per_push=4) as server:
        answer = send(server, 0, signed_push(server, 0, slice_of(server, 0, 0.5), steps=5))
        assert answer.kind == Kind.ERROR and "at most 4 steps (n_push), got 5" in answer.payload.decode()
        assert server.steps_applied() == 0


def test_a_reply_that_does_not_answer_the_request_is_refused_by_the_client():
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")

    def answer_with_an_old_reply() -> None:  # a signed PARAMETERS reply captured earlier, sent again
        envelope = router.recv_multipart()[:-1]
        old = Message(Kind.PARAMETERS, 0, 0, 1, protocol.float_payload(np.zeros(4)), sequence=1)
        router.send_multipart([*envelope, protocol.encode(old, SECRET)])

    thread = threading.Thread(target=answer_with_an_old_reply)
    thread.start()
    client = ParameterClient([f"tcp://127.0.0.1:{port}"], [(0, 4)], SECRET, worker=0, timeout_seconds=5)
    try:
        with pytest.raises(protocol.ProtocolError, match="request 1 does not answer FETCH request"):
            client.fetch()
    finally:
        thread.join()
        client.close()
        router.close()
        context.term()


def test_a_restarted_worker_continues_above_its_predecessors_sequence_numbers(server):
    for _ in range(2):  # the same worker number, one process after the other
        with client_for(server, worker=2) as client:
            client.fetch()
            client.push(np.full(101, 0.5, np.float32))
    assert server.statistics.rejected == 0 and server.statistics.pushes == 6


def test_a_resumed_job_refuses_the_earlier_jobs_requests_and_serves_its_own_workers(server):
    captured = signed_push(server, 0, slice_of(server, 0, 0.5), sequence=3)
    assert send(server, 0, captured).kind == Kind.ACK
    new_secret = b"next-job-secret"  # a resumed job draws a new secret; the sequence numbers start afresh
    with ParameterServer(INITIAL, 3, new_secret, learning_rate=0.1) as resumed:
        resumed.restore(server.state())
        answer = protocol.decode(raw_request(resumed.addresses[0], captured), new_secret, num_shards=3)
        assert answer.kind == Kind.ERROR and "authentication failed" in answer.payload.decode()
        with ParameterClient(resumed.addresses, resumed.bounds, new_secret, worker=7) as client:
            assert np.array_equal(client.fetch(), server.parameters()) and client.versions == [1, 0, 0]
            assert client.push(np.full(101, 0.5, np.float32)) == [2, 1, 1]


@pytest.mark.parametrize(
    ("gradient", "steps", "error", "reason"),
    [
        (np.full(101, 0.5, np.float32), 5, ServerError, "refused worker 0's push: a push may cover at most 4 steps"),
        (np.full(101, math.nan, np.float32), 1, NonFiniteError, "101 NaN or ±Inf value"),
    ],
)
def test_a_refused_push_stops_the_background_client_with_the_reason(gradient, steps, error, reason):
    with ParameterServer(INITIAL, 3, SECRET, max_steps_per_push=4) as server:
        client = BackgroundClient(lambda: client_for(server))
        client.push(gradient, steps)
        with pytest.raises(error, match=reason):
            client.fetch_now()
        with pytest.raises(error):
            client.close()


def test_a_worker_whose_push_was_refused_exits_naming_the_reason(monkeypatch, tmp_path):
    def refused(job: dict, rank: int, report: object) -> None:
        raise ServerError("parameter shard 1 refused worker 3's push: push from worker 3 holds NaN or ±Inf values")

    monkeypatch.setattr(downpour_worker, "train_worker", refused)
    monkeypatch.setattr("sys.stdin", io.StringIO("{}"))
    with pytest.raises(SystemExit, match=r"\[downpour\] worker 3 stops: parameter shard 1 refused worker 3's push"):
        downpour_worker.main(["--rank", "3", "--report", str(tmp_path / "report.jsonl")])


def test_clipped_and_non_finite_pushes_reach_the_runs_metrics(server):
    send(server, 0, signed_push(server, 0, slice_of(server, 0, 1e20), sequence=1))
    send(server, 0, signed_push(server, 0, slice_of(server, 0, math.nan), sequence=2))
    earlier_attempt = {"clipped_pushes": 2, "non_finite_pushes": 1, "rejected": 1}
    metrics, _ = downpour._observations(downpour._combined_statistics(earlier_attempt, server), [], [])
    assert (metrics["clipped_pushes"], metrics["non_finite_pushes"], metrics["rejected_messages"]) == (3, 2, 2)
