"""Parameter-server shards (Adagrad, SGD, sharding, clipping, refusing non-finite updates) and the authenticated
wire format (sequence numbers against replays)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.strategies.parameter_server import protocol
from training.strategies.parameter_server.protocol import (
    Kind,
    Message,
    ProtocolError,
    SequenceCheck,
    StaleSequenceError,
)
from training.strategies.parameter_server.shards import NonFiniteError, ParameterShard, clip_push, shard_boundaries

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


def test_momentum_and_adam_match_values_worked_out_by_hand():
    momentum = ParameterShard(np.array([1.0]), "momentum", learning_rate=0.1)
    momentum.apply(np.array([2.0]))  # v = 2, p = 1 - 0.2
    momentum.apply(np.array([1.0]))  # v = 0.9·2 + 1 = 2.8, p = 0.8 - 0.28
    assert momentum.snapshot()[0] == pytest.approx([0.52], rel=1e-6)
    assert momentum.state()["velocity"] == pytest.approx([2.8])
    adam = ParameterShard(np.array([1.0]), "adam", learning_rate=0.01)
    adam.apply(np.array([0.5]))
    # m = 0.05, v = 0.00025; lr_t = 0.01·sqrt(0.001)/0.1; step = lr_t · m / (sqrt(v) + 1e-7) ≈ 0.01 (Adam's first
    # step is the learning rate, whatever the gradient's size)
    lr_t = 0.01 * math.sqrt(1 - 0.999) / (1 - 0.9)
    assert adam.snapshot()[0] == pytest.approx([1.0 - lr_t * 0.05 / (math.sqrt(0.00025) + 1e-7)], rel=1e-6)
    assert adam.snapshot()[0] == pytest.approx([0.99], rel=1e-5)
    state = adam.state()
    assert state["updates"] == 1 and state["first_moment"] == pytest.approx([0.05])
    resumed = ParameterShard(np.zeros(1), "adam", learning_rate=0.01)
    resumed.restore(state)
    adam.apply(np.array([0.2]))
    resumed.apply(np.array([0.2]))
    assert np.array_equal(adam.snapshot()[0], resumed.snapshot()[0])
    with pytest.raises(ValueError, match="checkpoint has no velocity: it was written with another server optimizer"):
        ParameterShard(np.zeros(1), "momentum").restore(state)


def test_a_scaled_step_moves_the_parameters_by_that_share():
    shard = ParameterShard(np.array([1.0, 2.0]), "sgd", learning_rate=0.5)
    shard.apply(np.array([2.0, -4.0]), scale=0.25)
    assert shard.snapshot()[0].tolist() == [0.75, 2.5]
    for bad in (0.0, 1.5, -1.0):
        with pytest.raises(ValueError, match="scale must be in"):
            shard.apply(np.array([1.0, 1.0]), scale=bad)


def test_a_push_applied_as_its_steps_moves_as_far_as_the_worker_did():
    # A push of 2 steps' summed gradient 0.6 (mean 0.3), Adagrad, learning rate 0.1, accumulator 0.1:
    # as one step:   accumulator 0.1 + 0.36 = 0.46,             step 0.1 · 0.6 / sqrt(0.46) = 0.0885
    # as its steps:  0.1 + 0.09 = 0.19, step 0.1 · 0.3 / sqrt(0.19) = 0.0688;
    #                0.19 + 0.09 = 0.28, step 0.1 · 0.3 / sqrt(0.28) = 0.0567 → 0.1255 in all, 1.42× as far
    one = ParameterShard(np.array([1.0]), "adagrad", learning_rate=0.1, initial_accumulator=0.1)
    one.apply(np.array([0.6]))
    assert one.snapshot()[0] == pytest.approx([1.0 - 0.1 * 0.6 / math.sqrt(0.46)], rel=1e-6)
    steps = ParameterShard(np.array([1.0]), "adagrad", learning_rate=0.1, initial_accumulator=0.1)
    version = steps.apply(np.array([0.6]), steps=2)
    assert steps.snapshot()[0] == pytest.approx([1.0 - 0.1 * 0.3 / math.sqrt(0.19) - 0.1 * 0.3 / math.sqrt(0.28)],
                                                rel=1e-6)
    assert steps.accumulator == pytest.approx([0.28]) and version == 1  # the version counts pushes
    # plain SGD: n steps of the mean are one step of the sum
    sgd = ParameterShard(np.array([1.0, 2.0]), "sgd", learning_rate=0.5)
    sgd.apply(np.array([2.0, -4.0]), steps=4)
    assert sgd.snapshot()[0].tolist() == [0.0, 4.0]
    # Adam counts every step for its bias correction: 3 steps of the mean = 3 single pushes of it
    adam, single = (ParameterShard(np.array([1.0]), "adam", learning_rate=0.01) for _ in range(2))
    adam.apply(np.array([1.5]), steps=3)
    for _ in range(3):
        single.apply(np.array([0.5]))
    assert adam.state()["updates"] == 3 and adam.snapshot()[0] == pytest.approx(single.snapshot()[0], rel=1e-6)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="a push is applied as at least one step"):
            adam.apply(np.array([1.0]), steps=bad)


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
    with pytest.raises(ValueError, match="server optimizer 'rmsprop'"):
        ParameterShard(np.ones(2), "rmsprop")
    with pytest.raises(ValueError, match="gradient of 3 values for a shard of 2"):
        ParameterShard(np.ones(2)).apply(np.ones(3))


def frame(kind: Kind = Kind.PUSH, shard: int = 1, values=(1.0, 2.0, 3.0), secret: bytes = SECRET) -> bytes:
    return protocol.encode(Message(kind, shard, worker=4, clock=7, payload=protocol.float_payload(
        np.array(values)), steps=16, sequence=2**40 + 3), secret)


def test_a_message_round_trips_with_raw_float32_values():
    message = protocol.decode(frame(), SECRET, num_shards=2)
    assert (message.kind, message.shard, message.worker, message.clock, message.steps, message.sequence) == \
        (Kind.PUSH, 1, 4, 7, 16, 2**40 + 3)
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
        (lambda: frame()[:4] + bytes([2]) + frame()[5:40], "protocol version 2, this side speaks 3"),
    ],
)
def test_malformed_or_unauthenticated_messages_are_rejected(make_frame, reason):
    with pytest.raises(ProtocolError, match=reason):
        protocol.decode(make_frame(), SECRET, num_shards=2)


def test_an_oversized_length_is_rejected_before_reading_the_payload():
    header = protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, int(Kind.PUSH), protocol.FLOAT32, 0, 0, 0, 1,
                                  1, 2**40)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        protocol.decode(header + bytes(protocol.TAG_BYTES), SECRET, num_shards=1, max_payload_bytes=1024)


def test_sequence_numbers_must_grow_per_worker():
    check = SequenceCheck()
    check.admit(Message(Kind.PUSH, 0, worker=0, clock=0, sequence=10))
    check.admit(Message(Kind.PUSH, 0, worker=1, clock=0, sequence=3))  # another worker counts on its own
    for worker, sequence in [(0, 10), (0, 9), (1, 3)]:
        with pytest.raises(StaleSequenceError, match=f"sequence number {sequence} from worker {worker} is not newer"):
            check.admit(Message(Kind.FETCH, 0, worker=worker, clock=0, sequence=sequence))
    check.admit(Message(Kind.FETCH, 0, worker=0, clock=0, sequence=11))


def test_clip_push_caps_the_norm_per_accumulated_step():
    gradient = np.array([3.0, 4.0], np.float32)  # norm 5
    clipped, was_clipped = clip_push(gradient, steps=2, max_norm=1.0)  # limit 2: scale by 2/5
    assert was_clipped and clipped.dtype == np.float32
    assert clipped.tolist() == pytest.approx([1.2, 1.6])
    assert clip_push(gradient, steps=5, max_norm=1.0) == (gradient, False)  # norm 5 <= 5 × 1
    assert clip_push(gradient, steps=1, max_norm=0.0) == (gradient, False)  # 0: never


@pytest.mark.parametrize("value", [1e20, 2e19, np.finfo(np.float32).max])
def test_clip_push_of_values_whose_squares_overflow_float32_is_finite(value):
    gradient = np.array([value, -value, 1.0], np.float32)
    with np.errstate(over="raise"):
        clipped, was_clipped = clip_push(gradient, steps=4, max_norm=100.0)
    assert was_clipped and np.isfinite(clipped).all()
    assert np.linalg.norm(clipped.astype(np.float64)) == pytest.approx(400.0, rel=1e-6)


def test_adagrad_after_clipping_stays_finite_and_steps_at_most_the_learning_rate():
    shard = ParameterShard(np.zeros(3), "adagrad", learning_rate=0.1)
    for _ in range(1000):
        shard.apply(clip_push(np.array([1e20, -3e38, 2e19], np.float32), steps=4, max_norm=100.0)[0])
    parameters, version = shard.snapshot()
    assert version == 1000
    assert np.isfinite(parameters).all() and np.isfinite(shard.accumulator).all()
    assert np.all(np.abs(parameters) <= 0.1 * 1000)  # Adagrad: |step| = lr·|g|/sqrt(0.1 + Σg²) < lr
    shard.apply(np.array([0.0, 1.0, 0.0]))  # not frozen: a small gradient still moves the parameter
    assert shard.snapshot()[0][1] < parameters[1]


@pytest.mark.parametrize(
    ("optimizer", "initial", "gradient", "reason"),
    [
        ("adagrad", 0.0, math.nan, "1 NaN or ±Inf value"),
        ("adagrad", 0.0, math.inf, "1 NaN or ±Inf value"),
        ("adagrad", 0.0, -math.inf, "1 NaN or ±Inf value"),
        ("adagrad", 0.0, 2e19, "would overflow float32"),  # finite, but its square is not (unclipped)
        ("sgd", 3e38, -1e38, "would overflow float32"),  # 3e38 + 0.5·1e38 > float32 max
    ],
)
def test_a_non_finite_gradient_or_update_is_refused_and_changes_nothing(optimizer, initial, gradient, reason):
    shard = ParameterShard(np.array([initial, 1.0]), optimizer, learning_rate=0.5)
    before = shard.state()
    with pytest.raises(NonFiniteError, match=reason):
        shard.apply(np.array([gradient, 0.5], np.float32))
    after = shard.state()
    assert after.keys() == before.keys() and all(np.array_equal(after[key], before[key]) for key in before)
    assert after["version"] == 0


def test_a_checkpoint_with_non_finite_values_is_not_restored():
    shard = ParameterShard(np.ones(2), "adagrad")
    with pytest.raises(NonFiniteError, match="checkpoint accumulator"):
        shard.restore({"parameters": np.ones(2), "accumulator": np.array([0.1, np.inf]), "version": 3})
    assert shard.snapshot()[1] == 0


def test_an_unknown_optimizer_name_is_refused_naming_the_choices():
    from training.models.optimizers import make_optimizer

    with pytest.raises(ValueError, match="optimizer 'rmsprop': must be one of adagrad, sgd, momentum, adam"):
        make_optimizer("rmsprop", 0.1)


@pytest.mark.parametrize("optimizer", ["adagrad", "sgd", "momentum", "adam"])
def test_the_workers_keras_step_and_the_servers_numpy_step_agree_step_for_step(optimizer):
    import tensorflow as tf

    from training.models.optimizers import make_optimizer

    rng = np.random.default_rng(7)
    initial = rng.normal(size=257).astype(np.float32)
    gradients = [rng.normal(scale=scale, size=257).astype(np.float32) for scale in (0.1, 1.0, 3.0, 0.01, 0.5, 2.0)]
    server = ParameterShard(initial, optimizer, learning_rate=0.1)  # the server's own initial accumulator
    variable = tf.Variable(initial)
    local = make_optimizer(optimizer, 0.1)
    for step, gradient in enumerate(gradients, start=1):
        server.apply(gradient)
        local.apply_gradients([(tf.constant(gradient), variable)])
        np.testing.assert_allclose(variable.numpy(), server.snapshot()[0], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{optimizer}, step {step}")
    if optimizer == "adagrad":
        accumulator = local.get_slot(variable, "accumulator").numpy()
        np.testing.assert_allclose(accumulator, server.state()["accumulator"], rtol=1e-6)
