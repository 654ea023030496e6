"""The MNIST CNN's size settings: the default is the fast model, convolutions_per_stage/dense_units build the deeper
one (parameter counts computed by hand), and the settings reach the model every strategy builds."""

from __future__ import annotations

import pytest

from training.config import RunSpec, RunSpecError

pytest.importorskip("tensorflow")


def test_the_default_model_is_the_fast_one_and_the_deeper_one_has_the_hand_counted_parameters():
    from training.workloads.mnist_elastic_cnn.model import simard_cnn

    # conv 3×3×1×32+32 = 320 → 26 → pool 13 → conv 3×3×32×64+64 = 18,496 → 11 → pool 5; dense 5·5·64·128+128 =
    # 204,928; logits 128·10+10 = 1,290
    assert simard_cnn().count_params() == 320 + 18_496 + 204_928 + 1_290
    # two convolutions a stage: +3×3×32×32+32 = 9,248 and +3×3×64×64+64 = 36,928; 28 → 24 → 12 → 8 → 4, so the
    # dense layer sees 4·4·64 = 1,024 inputs: 1,024·256+256 = 262,400; logits 256·10+10 = 2,570
    deeper = simard_cnn(convolutions_per_stage=2, dense_units=256)
    assert deeper.count_params() == 320 + 9_248 + 18_496 + 36_928 + 262_400 + 2_570
    assert deeper.output_shape == (None, 10)
    # the setting's largest value still fits 28 × 28: 28 → 22 → pool 11 → 5 → pool 2
    assert simard_cnn(convolutions_per_stage=3).layers[-4].output_shape == (None, 2 * 2 * 64)
    with pytest.raises(ValueError, match="at least 1"):
        simard_cnn(convolutions_per_stage=0)


def test_batch_norm_replaces_the_convolutions_bias_with_four_statistics_a_channel():
    from training.workloads.mnist_elastic_cnn.model import simard_cnn

    # the four convolutions lose their biases (32 + 32 + 64 + 64 = 192 fewer); each channel gets a scale and a
    # shift (trained) and a moving mean and variance (not trained): 4 · (32 + 32 + 64 + 64) = 768
    model = simard_cnn(convolutions_per_stage=2, dense_units=256, batch_norm=True)
    assert model.count_params() == 329_962 - 192 + 768
    assert sum(int(weight.shape[0]) for weight in model.non_trainable_weights) == 2 * (32 + 32 + 64 + 64)
    assert [layer.__class__.__name__ for layer in model.layers[:3]] == ["Conv2D", "BatchNormalization", "ReLU"]
    assert not model.layers[0].use_bias
    assert not simard_cnn(convolutions_per_stage=2, dense_units=256).non_trainable_weights  # off by default


def test_the_size_settings_reach_the_workloads_model_and_are_bounded():
    from training.workload_registry import workload_for

    spec = RunSpec.from_mapping({"workload": "mnist_elastic_cnn", "convolutions_per_stage": 2, "dense_units": 256})
    assert workload_for(spec).build_model().count_params() == 329_962
    assert workload_for(RunSpec(workload="mnist_elastic_cnn")).build_model().count_params() == 225_034
    normalized = RunSpec.from_mapping({"workload": "mnist_elastic_cnn", "batch_norm": True})
    assert workload_for(normalized).build_model().non_trainable_weights
    for bad in ({"convolutions_per_stage": 0}, {"convolutions_per_stage": 4}, {"dense_units": 8},
                {"dense_units": "wide"}, {"convolutions_per_stage": 1.5}, {"batch_norm": "maybe"}):
        with pytest.raises(RunSpecError, match=next(iter(bad))):
            RunSpec.from_mapping({"workload": "mnist_elastic_cnn", **bad}).validate()


@pytest.mark.parametrize("strategy", ["horovod", "averaging"])
def test_batch_norm_is_accepted_where_the_statistics_travel_with_the_weights(strategy):
    RunSpec.from_mapping({"workload": "mnist_elastic_cnn", "batch_norm": True, "strategy": strategy}).validate()


def test_downpour_refuses_batch_norm_before_anything_runs():
    spec = RunSpec.from_mapping({"workload": "mnist_elastic_cnn", "batch_norm": True, "strategy": "downpour"})
    with pytest.raises(RunSpecError, match="batch_norm=true: Downpour's parameter server holds trainable"):
        spec.validate()
