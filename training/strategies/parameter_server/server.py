"""The parameter server: S shards, each served by its own thread on its own ZeroMQ socket.

It runs inside the Spark driver. Trade-off: the driver already outlives every worker, owns the checkpoint and
is the one process whose end the job controls, so there is no server process to start, find or leave hanging
(the most common complaint about Elephas); the price is that the shards share the driver's CPU and GIL (numpy's
updates release it). Separate server processes would isolate them, at the cost of managing their lifetimes.

ZeroMQ (pyzmq) carries the messages: it frames them (no hand-written length reassembly), routes many workers
through one socket per shard, caps message sizes in the transport, and lets every wait time out.

What one push may do is bounded: a request must be authenticated and newer than the worker's last one (no replay),
a gradient with NaN or ±Inf is refused, and a gradient's L2 norm per accumulated step is clipped at
``max_push_norm`` (per shard). A refusal is an error reply to the worker; the server keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import zmq

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.protocol import Kind, Message, ProtocolError, SequenceCheck
from training.strategies.parameter_server.shards import NonFiniteError, ParameterShard, clip_push, shard_boundaries

log = logging.getLogger(__name__)

POLL_MILLISECONDS = 100


@dataclass
class ServerStatistics:
    """What crossed the wire; staleness = server versions between a worker's fetch and its push."""

    fetches: int = 0
    pushes: int = 0
    rejected: int = 0  # every refused message, including the non-finite pushes
    non_finite_pushes: int = 0  # pushes refused because the gradient (or its update) held NaN or ±Inf
    clipped_pushes: int = 0  # pushes applied scaled down to max_push_norm
    bytes_in: int = 0
    bytes_out: int = 0
    staleness: list[int] = field(default_factory=list)
    first_fetch_time: float | None = None  # time.perf_counter() of the first fetch: training has begun
    last_push_time: float | None = None


class ParameterServer:
    """Serve ``initial`` (flat float32) split into ``num_shards`` shards; use as a context manager.

    ``max_push_norm``: a pushed gradient's L2 norm per accumulated step, per shard, is clipped at this (0: no
    clipping); ``max_steps_per_push`` (the run's n_push) caps the steps a push may claim, so the bound holds;
    ``staleness_aware``: a push's step is divided by its staleness (versions since the worker's fetch, ≥ 1);
    ``push_as_steps``: a push is applied as the steps it covers, each with their mean gradient (one step else).
    """

    def __init__(self, initial: np.ndarray, num_shards: int, secret: bytes, optimizer: str = "adagrad",
                 learning_rate: float = 0.01, host: str = "127.0.0.1", max_push_norm: float = 100.0,
                 max_steps_per_push: int | None = None, staleness_aware: bool = False,
                 push_as_steps: bool = False) -> None:
        if not 0 <= max_push_norm < float("inf"):
            raise ValueError(f"max_push_norm must be a finite number >= 0 (0 turns clipping off), got {max_push_norm}")
        if max_steps_per_push is not None and max_steps_per_push < 1:
            raise ValueError(f"max_steps_per_push must be >= 1, got {max_steps_per_push}")
        initial = np.asarray(initial, np.float32).ravel()
        self.bounds = shard_boundaries(initial.size, num_shards)
        self.shards = [ParameterShard(initial[start:stop], optimizer, learning_rate) for start, stop in self.bounds]
        self.secret = secret
        self.host = host
        self.max_push_norm = max_push_norm
        self.max_steps_per_push = max_steps_per_push
        self.staleness_aware = staleness_aware
        self.push_as_steps = push_as_steps
        self.addresses: list[str] = []
        self.statistics = ServerStatistics()
        self._steps_applied = [0] * num_shards  # worker steps whose gradients each shard has applied
        self._sequences = [SequenceCheck() for _ in range(num_shards)]  # each used by its shard's thread only
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._context = zmq.Context()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ParameterServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> list[str]:
        ready = []
        for index in range(len(self.shards)):
            socket = self._context.socket(zmq.ROUTER)
            socket.setsockopt(zmq.LINGER, 0)
            # A frame larger than this shard's parameters plus header and tag is dropped by ZeroMQ itself.
            socket.setsockopt(zmq.MAXMSGSIZE, self._max_payload(index) + protocol.HEADER.size + 1024)
            # Loopback stays private; a cluster driver listens on every interface and advertises its host name.
            port = socket.bind_to_random_port("tcp://127.0.0.1" if self.host == "127.0.0.1" else "tcp://*")
            self.addresses.append(f"tcp://{self.host}:{port}")
            ready.append(socket)
        for index, socket in enumerate(ready):
            thread = threading.Thread(target=self._serve, args=(index, socket), name=f"ps-shard-{index}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("parameter server: %d shards at %s", len(self.shards), ", ".join(self.addresses))
        return self.addresses

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Stop serving, join the threads and release the ports; safe to call twice."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_seconds)
        self._threads = []
        self._context.term()

    def parameters(self) -> np.ndarray:
        return np.concatenate([shard.snapshot()[0] for shard in self.shards])

    def steps_applied(self) -> int:
        """Worker steps whose accumulated gradients every shard has applied."""
        with self._lock:
            return min(self._steps_applied)

    def state(self) -> dict[str, np.ndarray | int]:
        """Parameters, optimizer state and versions of every shard, flat, for a checkpoint. Not the workers'
        sequence numbers: they hold under this job's secret only, and a resumed job has a new one."""
        state: dict[str, np.ndarray | int] = {}
        for index, shard in enumerate(self.shards):
            state.update({f"shard{index}_{key}": value for key, value in shard.state().items()})
        return state

    def restore(self, state: dict[str, np.ndarray | int]) -> None:
        """Load what :meth:`state` saved; the shard count and sizes must match."""
        for index, shard in enumerate(self.shards):
            prefix = f"shard{index}_"
            values = {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}
            if not values or np.asarray(values["parameters"]).size != shard.parameters.size:
                raise ValueError(f"checkpoint does not match parameter shard {index} of {len(self.shards)}")
            shard.restore(values)

    def _max_payload(self, index: int) -> int:
        start, stop = self.bounds[index]
        return (stop - start) * 4

    def _serve(self, index: int, socket: zmq.Socket) -> None:
        shard = self.shards[index]
        try:
            while not self._stop.is_set():
                if not socket.poll(POLL_MILLISECONDS):
                    continue
                frames = socket.recv_multipart()
                # A REQ envelope: routing identity (and request id), an empty delimiter, then one message frame.
                if b"" not in frames or frames.index(b"") != len(frames) - 2:
                    continue  # not a request we can answer
                envelope, frame = frames[:-1], frames[-1]
                reply = self._handle(index, shard, frame)
                socket.send_multipart([*envelope, protocol.encode(reply, self.secret)])
                with self._lock:
                    self.statistics.bytes_in += len(frame)
                    self.statistics.bytes_out += len(reply.payload)
        finally:
            socket.close(linger=0)

    def _handle(self, index: int, shard: ParameterShard, frame: bytes) -> Message:
        message = None
        try:
            message = protocol.decode(frame, self.secret, len(self.shards), self._max_payload(index))
            if message.shard != index:
                raise ProtocolError(f"message for shard {message.shard} sent to shard {index}")
            self._sequences[index].admit(message)
            if message.kind == Kind.FETCH:
                parameters, version = shard.snapshot()
                with self._lock:
                    self.statistics.fetches += 1
                    if self.statistics.first_fetch_time is None:
                        self.statistics.first_fetch_time = time.perf_counter()
                return Message(Kind.PARAMETERS, index, message.worker, version, protocol.float_payload(parameters),
                               sequence=message.sequence)
            if message.kind == Kind.PUSH:
                return self._push(index, shard, message)
            raise ProtocolError(f"a server does not accept {message.kind.name} messages")
        except (ProtocolError, ValueError) as error:
            with self._lock:
                self.statistics.rejected += 1
                self.statistics.non_finite_pushes += isinstance(error, NonFiniteError)
            log.warning("parameter shard %d rejected a message: %s", index, error)
            worker, sequence = (message.worker, message.sequence) if message else (0, 0)
            return Message(Kind.ERROR, index, worker, 0, str(error).encode(), sequence=sequence)

    def _push(self, index: int, shard: ParameterShard, message: Message) -> Message:
        if message.steps < 1:
            raise ProtocolError(f"a push must cover at least one step, got {message.steps}")
        if self.max_steps_per_push is not None and message.steps > self.max_steps_per_push:
            raise ProtocolError(f"a push may cover at most {self.max_steps_per_push} steps (n_push), "
                                f"got {message.steps}")
        gradient = message.values()
        if not np.isfinite(gradient).all():
            raise NonFiniteError(f"push from worker {message.worker} holds NaN or ±Inf values; refused, the "
                                 f"parameters are unchanged (the worker's training has diverged)")
        gradient, clipped = clip_push(gradient, message.steps, self.max_push_norm)
        # Versions applied since the worker's fetch: only this shard's thread changes its version.
        staleness = max(0, shard.version - message.clock)
        version = shard.apply(gradient, 1 / max(1, staleness) if self.staleness_aware else 1.0,
                              message.steps if self.push_as_steps else 1)
        with self._lock:
            self.statistics.pushes += 1
            self.statistics.clipped_pushes += clipped
            first_clip = clipped and self.statistics.clipped_pushes == 1
            self._steps_applied[index] += message.steps
            self.statistics.last_push_time = time.perf_counter()
            self.statistics.staleness.append(staleness)
        if clipped:  # said once aloud; the run's clipped_pushes metric has the count
            log.log(logging.WARNING if first_clip else logging.DEBUG, "parameter shard %d scaled down a push from "
                    "worker %d to max_push_norm %g per step", index, message.worker, self.max_push_norm)
        return Message(Kind.ACK, index, message.worker, version, sequence=message.sequence)
