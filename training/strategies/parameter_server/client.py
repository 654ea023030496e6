"""A worker's connection to the parameter server: fetch all shards, push a gradient to all shards, with timeouts."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import zmq

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.protocol import Kind, Message
from training.strategies.parameter_server.shards import NonFiniteError


class ServerError(RuntimeError):
    """The server answered, but rejected the request; the text is its reason."""


class ParameterClient:
    """One REQ socket per shard; every call gives up after ``timeout_seconds`` instead of hanging.

    Every request carries a new sequence number. They start at the wall clock in nanoseconds, so a worker
    process restarted under the same job secret and worker number continues above its predecessor's numbers
    (one process per worker number: two would refuse each other's requests as replays).
    """

    def __init__(self, addresses: Sequence[str], bounds: Sequence[tuple[int, int]], secret: bytes, worker: int,
                 timeout_seconds: float = 30.0) -> None:
        self.addresses, self.bounds, self.secret, self.worker = list(addresses), list(bounds), secret, worker
        self.timeout_seconds = timeout_seconds
        self.versions = [0] * len(self.addresses)  # the server version each shard had at our last fetch
        self.bytes_sent = 0
        self.bytes_received = 0
        self._sequence = time.time_ns()
        self._context = zmq.Context()
        self._sockets = [self._connect(address) for address in self.addresses]

    def _connect(self, address: str) -> zmq.Socket:
        socket = self._context.socket(zmq.REQ)
        milliseconds = int(self.timeout_seconds * 1000)
        socket.setsockopt(zmq.RCVTIMEO, milliseconds)
        socket.setsockopt(zmq.SNDTIMEO, milliseconds)
        socket.setsockopt(zmq.LINGER, 0)
        # After a timeout the next request may be sent anyway, and a late answer to the old one is discarded.
        socket.setsockopt(zmq.REQ_RELAXED, 1)
        socket.setsockopt(zmq.REQ_CORRELATE, 1)
        socket.connect(address)
        return socket

    def _call(self, shard: int, request: Message, expected: Kind) -> Message:
        self._sequence += 1
        request = dataclasses.replace(request, sequence=self._sequence)
        frame = protocol.encode(request, self.secret)
        try:
            self._sockets[shard].send(frame)
            answer = self._sockets[shard].recv()
        except zmq.Again:
            raise TimeoutError(f"parameter shard {shard} at {self.addresses[shard]} did not answer within "
                               f"{self.timeout_seconds:g} s") from None
        self.bytes_sent += len(frame)
        self.bytes_received += len(answer)
        reply = protocol.decode(answer, self.secret, len(self.addresses))
        if reply.kind == Kind.ERROR:
            raise ServerError(f"parameter shard {shard} refused worker {self.worker}'s {request.kind.name.lower()}: "
                              f"{reply.payload.decode(errors='replace')}")
        if (reply.kind, reply.shard, reply.sequence) != (expected, shard, request.sequence):
            raise protocol.ProtocolError(f"parameter shard {shard}: a {reply.kind.name} reply for shard {reply.shard} "
                                         f"and request {reply.sequence} does not answer {request.kind.name} request "
                                         f"{request.sequence}")
        return reply

    def fetch(self) -> np.ndarray:
        """The current parameters of every shard, as one flat float32 array."""
        parts = []
        for shard in range(len(self.addresses)):
            reply = self._call(shard, Message(Kind.FETCH, shard, self.worker, 0), Kind.PARAMETERS)
            self.versions[shard] = reply.clock
            parts.append(reply.values())
        return np.concatenate(parts)

    def push(self, gradient: np.ndarray, steps: int = 1) -> list[int]:
        """Send each shard its slice of a flat gradient accumulated over ``steps`` local steps; returns the
        shards' new versions. A refusal raises ServerError; a gradient with NaN or ±Inf raises NonFiniteError
        before any shard sees it (the server would refuse it too, but only on the shards holding those values)."""
        gradient = np.asarray(gradient, np.float32).ravel()
        if not np.isfinite(gradient).all():
            raise NonFiniteError(f"worker {self.worker}: the accumulated gradient holds "
                                 f"{np.count_nonzero(~np.isfinite(gradient))} NaN or ±Inf value(s); not pushed "
                                 f"(its training has diverged)")
        versions = []
        for shard, (start, stop) in enumerate(self.bounds):
            payload = protocol.float_payload(gradient[start:stop])
            reply = self._call(shard, Message(Kind.PUSH, shard, self.worker, self.versions[shard], payload, steps),
                               Kind.ACK)
            versions.append(reply.clock)
        return versions

    def close(self) -> None:
        for socket in self._sockets:
            socket.close(linger=0)
        self._context.term()

    def __enter__(self) -> ParameterClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BackgroundClient:
    """A ParameterClient on a thread of its own, like the DownpourSGDClient's "start asynchronously" calls: the
    worker keeps computing while the previous push or fetch is on the wire. At most ``depth`` requests wait in
    line (then the worker waits: it must not outrun the network without bound); the first failure (a timeout, a
    rejection) is raised at the worker's next call."""

    def __init__(self, make_client: Callable[[], ParameterClient], depth: int = 2) -> None:
        self._requests: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=depth)
        self._fetched: np.ndarray | None = None
        self._fetched_ready = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self.versions: list[int] = []
        self.bytes_sent = self.bytes_received = 0
        self.waiting_seconds = 0.0  # time the worker spent blocked on communication
        self._thread = threading.Thread(target=self._run, args=(make_client,), name="parameter-client", daemon=True)
        self._thread.start()

    def _run(self, make_client: Callable[[], ParameterClient]) -> None:
        try:
            with make_client() as client:
                while (request := self._requests.get()) is not None:
                    if request[0] == "push":
                        client.push(request[1], request[2])
                    else:
                        parameters = client.fetch()
                        with self._lock:
                            self._fetched, self.versions = parameters, list(client.versions)
                        self._fetched_ready.set()
                    self.bytes_sent, self.bytes_received = client.bytes_sent, client.bytes_received
        except BaseException as error:  # handed to the worker thread
            self._error = error
            self._fetched_ready.set()

    def _put(self, request: tuple[Any, ...] | None) -> None:
        started = time.perf_counter()
        while True:
            self._raise_failure()
            try:
                self._requests.put(request, timeout=0.5)
                break
            except queue.Full:
                continue
        self.waiting_seconds += time.perf_counter() - started

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._thread.is_alive():
            raise RuntimeError("the parameter-client thread has stopped")

    def push(self, gradient: np.ndarray, steps: int) -> None:
        """Queue a push of a gradient accumulated over ``steps`` steps; returns at once unless the line is full."""
        self._put(("push", gradient, steps))

    def request_fetch(self) -> None:
        self._put(("fetch",))

    def take_fetched(self) -> np.ndarray | None:
        """The newest fetched parameters not taken yet, or None when no fetch has completed since."""
        with self._lock:
            fetched, self._fetched = self._fetched, None
            self._fetched_ready.clear()
        return fetched

    def fetch_now(self) -> np.ndarray:
        """Fetch and wait for the answer."""
        started = time.perf_counter()
        self.take_fetched()
        self.request_fetch()
        while True:
            self._fetched_ready.wait(0.5)
            self._raise_failure()
            fetched = self.take_fetched()
            if fetched is not None:
                self.waiting_seconds += time.perf_counter() - started
                return fetched

    def close(self) -> None:
        """Send what is queued, stop the thread, and raise its failure if it had one."""
        if self._thread.is_alive() and self._error is None:
            self._put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
