"""The compute precision setting: bfloat16 only where the CPU has it, the same model (float32 weights) computing
in bfloat16 with predictions within tolerance of float32's, and the process left at float32."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from training import machine_speed
from training.config import RunSpec
from training.models import precision
from training.settings import RunSpecError
from training.workload_registry import workload_for
from training.workloads.mnist_elastic_cnn.model import simard_cnn

AMX_FLAGS = "processor\t: 0\nflags\t\t: fpu sse avx512f amx_tile amx_bf16 amx_int8\n"
NO_BF16_FLAGS = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n"


@pytest.mark.parametrize(("cpuinfo", "expected"), [(AMX_FLAGS, True), (NO_BF16_FLAGS, False),
                                                   ("flags\t: avx512_bf16\n", True), ("", False)])
def test_bf16_hardware_is_read_from_the_cpu_flags(tmp_path, cpuinfo, expected):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    assert machine_speed.bf16_hardware(str(path)) is expected
    assert machine_speed.bf16_hardware(str(tmp_path / "missing")) is False


def test_a_cpu_without_bf16_refuses_mixed_bfloat16_in_one_line(monkeypatch):
    monkeypatch.setattr(precision, "bf16_hardware", lambda: False)
    precision.check_hardware("float32")  # always allowed
    with pytest.raises(RunSpecError) as refused:
        precision.check_hardware("mixed_bfloat16")
    assert "\n" not in str(refused.value) and "precision=float32" in str(refused.value)
    spec = RunSpec.from_json({"workload": "mnist_elastic_cnn", "precision": "mixed_bfloat16"})
    trainable = workload_for(spec)  # evaluating float32 weights needs no bfloat16: only building to train refuses
    with pytest.raises(RunSpecError, match="neither AMX nor AVX512-BF16"):
        trainable.build_model()


def test_precision_takes_only_the_declared_policies():
    with pytest.raises(RunSpecError, match="precision"):
        RunSpec.from_json({"workload": "mnist_elastic_cnn", "precision": "mixed_float16"}).validate()


def test_float32_builds_a_float32_model():
    model = workload_for(RunSpec.from_json({"workload": "mnist_elastic_cnn"})).build_model()
    assert {layer.compute_dtype for layer in model.layers if layer.weights} == {"float32"}
    assert tf.keras.mixed_precision.global_policy().name == "float32"


@pytest.mark.skipif(not machine_speed.bf16_hardware(), reason="this CPU has no bfloat16 hardware")
def test_mixed_bfloat16_is_the_same_model_computing_in_bfloat16():
    spec = RunSpec.from_json({"workload": "mnist_elastic_cnn", "precision": "mixed_bfloat16"})
    trainable = workload_for(spec)
    tf.keras.utils.set_random_seed(0)
    mixed = trainable.build_model()
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # later loads stay float32
    assert {layer.compute_dtype for layer in mixed.layers if layer.weights} == {"bfloat16"}
    assert {weight.dtype for weight in mixed.weights} == {tf.float32}  # what is saved and averaged
    exact = simard_cnn()
    assert [weight.shape for weight in exact.weights] == [weight.shape for weight in mixed.weights]
    exact.set_weights(mixed.get_weights())

    images = np.random.default_rng(0).random((256, 28, 28, 1), np.float32)
    mixed_logits = mixed(images, training=False)
    assert mixed_logits.dtype == tf.bfloat16
    mixed_probabilities = tf.nn.softmax(tf.cast(mixed_logits, tf.float32)).numpy()
    exact_probabilities = tf.nn.softmax(exact(images, training=False)).numpy()
    assert np.abs(mixed_probabilities - exact_probabilities).max() < 0.02
    assert np.mean(mixed_probabilities.argmax(1) == exact_probabilities.argmax(1)) >= 0.95

    labels = np.arange(256) % 10
    loss = trainable.make_loss()
    assert trainable.make_loss() is loss  # one per process, as the speaker models' margin ramp needs
    mixed_loss = float(loss(labels, mixed_logits))
    exact_loss = float(tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, exact(images)))
    assert mixed_loss == pytest.approx(exact_loss, rel=0.02)
