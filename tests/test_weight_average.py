"""The exponential moving average of the weights: its arithmetic against hand-computed values, the swap used for
evaluation, checkpointing, and the setting's validation. The Horovod run that uses it is in
test_horovod_training.py."""

from __future__ import annotations

import numpy as np
import pytest

from training.config import RunSpec
from training.settings import RunSpecError

tf = pytest.importorskip("tensorflow")

from training.strategies.weight_average import WeightAverage, ramped_decay  # noqa: E402


def one_weight_model() -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.layers.Input((1,)), tf.keras.layers.Dense(1, use_bias=False)])
    model.layers[0].kernel.assign([[0.0]])
    return model


def set_weight(model: tf.keras.Model, value: float) -> None:
    model.layers[0].kernel.assign([[value]])


def weight(model: tf.keras.Model) -> float:
    return float(model.layers[0].kernel.numpy()[0, 0])


def test_the_decay_ramps_from_0_to_the_setting():
    assert ramped_decay(0.999, 0) == 0.0  # the first update copies the weights
    assert ramped_decay(0.999, 1) == pytest.approx(1 / 11)
    assert ramped_decay(0.999, 10) == pytest.approx(0.5)
    assert ramped_decay(0.9, 90) == pytest.approx(0.9)  # 90/100 meets the setting
    assert ramped_decay(0.9, 10_000) == 0.9


def test_the_average_follows_the_weights_as_computed_by_hand():
    model = one_weight_model()
    average = WeightAverage(model, decay=0.5)
    set_weight(model, 4.0)
    average.update()  # decay 0: the average is the weights
    set_weight(model, 15.0)
    average.update()  # decay 1/11: 4/11 + 15·10/11 = 154/11 = 14
    assert float(average.averaged[0].numpy()[0, 0]) == pytest.approx(14.0)
    for _ in range(20):
        average.update()  # decay min(0.5, t/(10+t)) = 0.5 from t = 10 on
    expected = 14.0
    for step in range(2, 22):
        decay = min(0.5, step / (10 + step))
        expected = decay * expected + (1 - decay) * 15.0
    assert float(average.averaged[0].numpy()[0, 0]) == pytest.approx(expected)
    assert int(average.updates.numpy()) == 22
    assert weight(model) == 15.0  # training's weights are never touched by an update


def test_evaluation_sees_the_average_and_training_gets_its_weights_back():
    model = one_weight_model()
    average = WeightAverage(model, decay=0.9)
    set_weight(model, 2.0)
    average.update()
    set_weight(model, 13.0)
    average.update()  # 2/11 + 13·10/11 = 12
    inputs = np.ones((1, 1), np.float32)
    with average.swapped_in():
        assert weight(model) == pytest.approx(12.0)
        assert float(model(inputs)[0, 0]) == pytest.approx(12.0)
    assert weight(model) == 13.0
    with pytest.raises(RuntimeError), average.swapped_in():
        raise RuntimeError("an evaluation that fails")
    assert weight(model) == 13.0  # put back even then
    average.install()
    assert weight(model) == pytest.approx(12.0)


def test_a_checkpoint_restores_the_average_and_its_step_count(tmp_path):
    model = one_weight_model()
    average = WeightAverage(model, decay=0.9)
    for value in (1.0, 5.0, 9.0):
        set_weight(model, value)
        average.update()
    tf.train.Checkpoint(model=model, weight_average=average.state()).write(str(tmp_path / "state"))

    resumed_model = one_weight_model()
    resumed = WeightAverage(resumed_model, decay=0.9)
    tf.train.Checkpoint(model=resumed_model, weight_average=resumed.state()).read(str(tmp_path / "state"))
    assert weight(resumed_model) == 9.0
    assert float(resumed.averaged[0].numpy()[0, 0]) == pytest.approx(float(average.averaged[0].numpy()[0, 0]))
    assert int(resumed.updates.numpy()) == 3  # the ramp goes on where it stopped


@pytest.mark.parametrize("decay", [0.0, 1.0, 1.5, -0.1])
def test_the_callback_refuses_a_decay_outside_0_to_1(decay):
    with pytest.raises(ValueError, match="must be between 0 and 1"):
        WeightAverage(one_weight_model(), decay)


def test_the_setting_is_bounded_and_horovod_only():
    assert RunSpec().weight_average_decay == 0.0
    RunSpec(weight_average_decay=0.999).validate()
    for bad in (1.0, -0.5, float("nan")):
        with pytest.raises(RunSpecError, match="weight_average_decay="):
            RunSpec(weight_average_decay=bad).validate()
    for strategy in ("downpour", "averaging"):
        with pytest.raises(RunSpecError, match=f"only the horovod strategy keeps a weight average, not {strategy}"):
            RunSpec(strategy=strategy, weight_average_decay=0.99).validate()
    RunSpec(strategy="downpour", weight_average_decay=0.0).validate()
