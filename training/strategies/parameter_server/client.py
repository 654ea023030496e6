"""A worker's connection to the parameter server: fetch all shards, push a gradient to all shards, with timeouts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import zmq

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.protocol import Kind, Message


class ServerError(RuntimeError):
    """The server answered, but rejected the request; the text is its reason."""


class ParameterClient:
    """One REQ socket per shard; every call gives up after ``timeout_seconds`` instead of hanging."""

    def __init__(self, addresses: Sequence[str], bounds: Sequence[tuple[int, int]], secret: bytes, worker: int,
                 timeout_seconds: float = 30.0) -> None:
        self.addresses, self.bounds, self.secret, self.worker = list(addresses), list(bounds), secret, worker
        self.timeout_seconds = timeout_seconds
        self.versions = [0] * len(self.addresses)  # the server version each shard had at our last fetch
        self.bytes_sent = 0
        self.bytes_received = 0
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

    def _call(self, shard: int, message: Message) -> Message:
        frame = protocol.encode(message, self.secret)
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
            raise ServerError(f"parameter shard {shard}: {reply.payload.decode(errors='replace')}")
        return reply

    def fetch(self) -> np.ndarray:
        """The current parameters of every shard, as one flat float32 array."""
        parts = []
        for shard in range(len(self.addresses)):
            reply = self._call(shard, Message(Kind.FETCH, shard, self.worker, 0))
            self.versions[shard] = reply.clock
            parts.append(reply.values())
        return np.concatenate(parts)

    def push(self, gradient: np.ndarray, steps: int = 1) -> list[int]:
        """Send each shard its slice of a flat gradient accumulated over ``steps`` local steps; returns the
        shards' new versions."""
        gradient = np.asarray(gradient, np.float32).ravel()
        versions = []
        for shard, (start, stop) in enumerate(self.bounds):
            payload = protocol.float_payload(gradient[start:stop])
            reply = self._call(shard, Message(Kind.PUSH, shard, self.worker, self.versions[shard], payload, steps))
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
