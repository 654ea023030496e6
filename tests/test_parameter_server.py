"""Parameter-server shards (Adagrad, SGD, sharding) and the authenticated wire format."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.protocol import Kind, Message, ProtocolError
from training.strategies.parameter_server.shards import ParameterShard, shard_boundaries

SECRET = b"job-secret"


def test_adagrad_matches_values_worked_out_by_hand():
    shard = ParameterShard(np.array([1.0, -2.0]), "adagrad", learning_rate=0.1, initial_accumulator=0.1)
    shard.apply(np.array([0.3, -0.4]))
    # accumulators 0.1 + 0.09 = 0.19 and 0.1 + 0.16 = 0.26
    expected = [1.0 - 0.1 * 0.3 / math.sqrt(0.19), -2.0 + 0.1 * 0.4 / math.sqrt(0.26)]
    assert shard.snapshot()[0] == pytest.approx(expected, rel=1e-6)
    shard.apply(np.array([0.3, 0.0]))
    # first accumulator 0.19 + 0.09 = 0.28; the second parameter had no gradient and does not move
    expected = [expected[0] - 0.1 * 0.3 / math.sqrt(0.28), expected[1]]
    parameters, version = shard.snapshot()
    assert parameters == pytest.approx(expected, rel=1e-6)
    assert version == 2


def test_sgd_steps_by_the_learning_rate_times_the_gradient():
    shard = ParameterShard(np.array([1.0, 2.0]), "sgd", learning_rate=0.5)
    shard.apply(np.array([2.0, -4.0]))
    assert shard.snapshot()[0].tolist() == [0.0, 4.0]


def test_s_shard_apply_equals_one_shard_apply():
    rng = np.random.default_rng(0)
    initial = rng.normal(size=1001).astype(np.float32)
    gradients = [rng.normal(size=1001).astype(np.float32) for _ in range(5)]
    whole = ParameterShard(initial, "adagrad", learning_rate=0.05)
    bounds = shard_boundaries(initial.size, 3)
    parts = [ParameterShard(initial[start:stop], "adagrad", learning_rate=0.05) for start, stop in bounds]
    for gradient in gradients:
        whole.apply(gradient)
        for (start, stop), part in zip(bounds, parts, strict=True):
            part.apply(gradient[start:stop])
    assert np.array_equal(np.concatenate([part.snapshot()[0] for part in parts]), whole.snapshot()[0])


def test_shard_boundaries_cover_everything_in_near_equal_slices():
    bounds = shard_boundaries(10, 3)
    assert bounds[0][0] == 0 and bounds[-1][1] == 10
    assert all(stop == next_start for (_, stop), (next_start, _) in zip(bounds, bounds[1:], strict=False))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="cannot split"):
        shard_boundaries(2, 3)


def test_shard_state_survives_a_checkpoint_round_trip():
    shard = ParameterShard(np.ones(4), "adagrad", learning_rate=0.1)
    shard.apply(np.full(4, 0.5))
    restored = ParameterShard(np.zeros(4), "adagrad", learning_rate=0.1)
    restored.restore(shard.state())
    shard.apply(np.full(4, 0.25))
    restored.apply(np.full(4, 0.25))
    assert np.array_equal(shard.snapshot()[0], restored.snapshot()[0])
    assert restored.snapshot()[1] == 2


def test_bad_server_settings_are_rejected():
    with pytest.raises(ValueError, match="server optimizer 'adam'"):
        ParameterShard(np.ones(2), "adam")
    with pytest.raises(ValueError, match="gradient of 3 values for a shard of 2"):
        ParameterShard(np.ones(2)).apply(np.ones(3))


def frame(kind: Kind = Kind.PUSH, shard: int = 1, values=(1.0, 2.0, 3.0), secret: bytes = SECRET) -> bytes:
    return protocol.encode(Message(kind, shard, worker=4, clock=7, payload=protocol.float_payload(
        np.array(values)), steps=16), secret)


def test_a_message_round_trips_with_raw_float32_values():
    message = protocol.decode(frame(), SECRET, num_shards=2)
    assert (message.kind, message.shard, message.worker, message.clock, message.steps) == (Kind.PUSH, 1, 4, 7, 16)
    assert message.values().tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("make_frame", "reason"),
    [
        (lambda: frame(secret=b"other-secret"), "authentication failed"),
        (lambda: b"XXXX" + frame()[4:], "bad magic"),
        (lambda: frame()[:10], "truncated message"),
        (lambda: frame()[:-5], "length field says 12 payload bytes"),
        (lambda: frame(shard=5), "shard 5 out of range"),
        (lambda: frame()[:5] + bytes([99]) + frame()[6:], "unknown message kind 99"),
    ],
)
def test_malformed_or_unauthenticated_messages_are_rejected(make_frame, reason):
    with pytest.raises(ProtocolError, match=reason):
        protocol.decode(make_frame(), SECRET, num_shards=2)


def test_an_oversized_length_is_rejected_before_reading_the_payload():
    header = protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, int(Kind.PUSH), protocol.FLOAT32, 0, 0, 0, 1,
                                  2**40)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        protocol.decode(header + bytes(protocol.TAG_BYTES), SECRET, num_shards=1, max_payload_bytes=1024)
