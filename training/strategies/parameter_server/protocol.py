"""The parameter server's wire format: a fixed binary header, a raw float32 payload and an HMAC-SHA256 tag.

Nothing is unpickled or otherwise deserialised into code: a message is bytes in, (header fields, numpy view)
out, and every field is checked before the payload is touched. The tag covers header and payload with a secret
shared by the job, so a process without the secret cannot fetch or push. Every request carries a sequence number
inside the tagged header, so a captured request sent again is refused (:class:`SequenceCheck`): a replayed push
would be applied twice; a replayed fetch changes nothing, but is refused too rather than served a whole shard.
Every reply echoes the sequence number of the request it answers.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"CBPS"
VERSION = 3  # 3: the header carries a sequence number
# magic, protocol version, kind, dtype code, shard, worker, clock (a server version), steps (local steps a
# pushed gradient accumulates), sequence (per worker and shard, increasing; a reply echoes its request's), payload
# bytes
HEADER = struct.Struct(">4sBBBxHHIIQQ")
PREFIX = struct.Struct(">4sB")  # magic and version: the same in every version, so an old peer is named as such
TAG_BYTES = hashlib.sha256().digest_size
DTYPES = {1: np.dtype("<f4")}
FLOAT32 = 1
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024 * 1024


class Kind(enum.IntEnum):
    FETCH = 1  # worker → server: send me the shard (no payload)
    PARAMETERS = 2  # server → worker: the shard's parameters; clock = server version
    PUSH = 3  # worker → server: accumulated gradient; clock = server version the worker last fetched
    ACK = 4  # server → worker: update applied; clock = new server version
    ERROR = 5  # server → worker: rejected (payload: UTF-8 reason)
    SHUTDOWN = 6  # driver → server: stop serving


class ProtocolError(ValueError):
    """A message failed a check; the text says which."""


@dataclass(frozen=True)
class Message:
    kind: Kind
    shard: int
    worker: int
    clock: int
    payload: bytes = b""
    steps: int = 0
    sequence: int = 0

    def values(self) -> np.ndarray:
        """The payload as a read-only float32 array (no copy)."""
        if len(self.payload) % 4:
            raise ProtocolError(f"payload of {len(self.payload)} bytes is not whole float32 values")
        return np.frombuffer(self.payload, dtype=DTYPES[FLOAT32])


def encode(message: Message, secret: bytes) -> bytes:
    header = HEADER.pack(MAGIC, VERSION, int(message.kind), FLOAT32, message.shard, message.worker,
                         message.clock, message.steps, message.sequence, len(message.payload))
    tag = hmac.new(secret, header + message.payload, hashlib.sha256).digest()
    return header + message.payload + tag


def float_payload(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype=DTYPES[FLOAT32]).tobytes()


def decode(frame: bytes, secret: bytes, num_shards: int,
           max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Message:
    """Check and unpack one message; raises ProtocolError naming the first problem."""
    if len(frame) >= PREFIX.size:
        magic, version = PREFIX.unpack_from(frame)
        if magic != MAGIC:
            raise ProtocolError(f"bad magic {magic!r}: not a Cloudburst parameter-server message")
        if version != VERSION:
            raise ProtocolError(f"protocol version {version}, this side speaks {VERSION} (are driver and workers "
                                f"running the same Cloudburst?)")
    if len(frame) < HEADER.size + TAG_BYTES:
        raise ProtocolError(f"truncated message: {len(frame)} bytes, a header and tag need {HEADER.size + TAG_BYTES}")
    _, _, kind, dtype, shard, worker, clock, steps, sequence, length = HEADER.unpack_from(frame)
    if kind not in Kind._value2member_map_:
        raise ProtocolError(f"unknown message kind {kind}")
    if dtype not in DTYPES:
        raise ProtocolError(f"unknown dtype code {dtype}")
    if length > max_payload_bytes:
        raise ProtocolError(f"payload length {length} exceeds the limit of {max_payload_bytes} bytes")
    if len(frame) != HEADER.size + length + TAG_BYTES:
        raise ProtocolError(f"length field says {length} payload bytes, message carries "
                            f"{len(frame) - HEADER.size - TAG_BYTES}")
    body, tag = frame[: HEADER.size + length], frame[HEADER.size + length :]
    if not hmac.compare_digest(tag, hmac.new(secret, body, hashlib.sha256).digest()):
        raise ProtocolError("authentication failed: wrong secret or altered message")
    if kind != Kind.SHUTDOWN and not 0 <= shard < num_shards:
        raise ProtocolError(f"shard {shard} out of range 0..{num_shards - 1}")
    return Message(Kind(kind), shard, worker, clock, bytes(frame[HEADER.size : HEADER.size + length]), steps,
                   sequence)


class StaleSequenceError(ProtocolError):
    """An authenticated request whose sequence number is not newer than the last one accepted: a replay."""


class SequenceCheck:
    """Freshness for one shard: the last sequence number accepted from each worker; a request must exceed it.

    Scoped to one job's secret: a resumed job has a new secret, so requests captured from an earlier one fail
    authentication and the numbers need not outlive the server (nor go into its checkpoint).
    """

    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def admit(self, message: Message) -> None:
        """Record the message's sequence number, or raise StaleSequenceError if it is not newer."""
        last = self._last.get(message.worker)
        if last is not None and message.sequence <= last:
            raise StaleSequenceError(f"sequence number {message.sequence} from worker {message.worker} is not newer "
                                     f"than {last}: a replayed request, or two processes with one worker number")
        self._last[message.worker] = message.sequence
