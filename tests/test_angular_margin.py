"""The additive angular margin softmax against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from training.workloads.speaker_verification.angular_margin import (  # noqa: E402  (after the TensorFlow skip)
    AdditiveAngularMarginLoss,
    CosineLogits,
    ramped_margin,
)


def test_the_loss_of_one_example_by_hand():
    # cos θ = (0.5, 0.2), true class 0, s = 30, m = 0.2: the target logit is 30·cos(acos(0.5) + 0.2), the other 30·0.2.
    target = 30 * math.cos(math.acos(0.5) + 0.2)
    other = 30 * 0.2
    expected = -math.log(math.exp(target) / (math.exp(target) + math.exp(other)))
    loss = AdditiveAngularMarginLoss(scale=30, margin=0.2)
    value = float(loss(tf.constant([0]), tf.constant([[0.5, 0.2]])))
    assert value == pytest.approx(expected, rel=1e-5)
    assert value == pytest.approx(0.028617, abs=1e-5)  # the same number, written out


def test_without_margin_it_is_the_scaled_softmax_and_the_margin_only_raises_the_loss():
    cosines = tf.constant([[0.3, -0.1, 0.6], [0.9, 0.0, 0.2]])
    labels = tf.constant([2, 0])
    plain = tf.keras.losses.sparse_categorical_crossentropy(labels, 30 * cosines, from_logits=True)
    loss = AdditiveAngularMarginLoss(margin=0.0)
    assert float(loss(labels, cosines)) == pytest.approx(float(tf.reduce_mean(plain)), rel=1e-5)
    loss.set_margin(0.2)
    assert float(loss(labels, cosines)) > float(tf.reduce_mean(plain))


def test_past_pi_the_target_logit_keeps_falling():
    loss = AdditiveAngularMarginLoss(scale=1.0, margin=0.5)
    # θ_y close to π: cos(θ + m) would rise again; the fallback cos θ − m·sin m keeps the loss growing with θ.
    values = [float(loss(tf.constant([0]), tf.constant([[cos, 0.0]]))) for cos in (-0.8, -0.9, -0.99)]
    assert values[0] < values[1] < values[2]
    expected = -math.log(math.exp(-0.99 - 0.5 * math.sin(0.5)) / (math.exp(-0.99 - 0.5 * math.sin(0.5)) + 1))
    assert values[2] == pytest.approx(expected, rel=1e-4)


def test_cosine_logits_are_cosines_of_normalised_vectors():
    layer = CosineLogits(3)
    inputs = np.array([[3.0, 4.0], [-1.0, 0.0]], np.float32)
    outputs = layer(inputs).numpy()
    kernel = layer.kernel.numpy()
    expected = (inputs / np.linalg.norm(inputs, axis=1, keepdims=True)) @ (kernel / np.linalg.norm(kernel, axis=0))
    np.testing.assert_allclose(outputs, expected, rtol=1e-5)
    assert np.abs(outputs).max() <= 1.0 + 1e-6
    assert [weight.name.split("/")[-1] for weight in layer.trainable_weights] == ["kernel:0"]


def test_the_margin_ramps_from_zero_and_bad_values_are_refused():
    assert [ramped_margin(epoch, 0.2, 4) for epoch in range(6)] == pytest.approx([0, 0.05, 0.1, 0.15, 0.2, 0.2])
    with pytest.raises(ValueError, match="margin must be in"):
        AdditiveAngularMarginLoss(margin=-0.1)
    with pytest.raises(ValueError, match="scale must be > 0"):
        AdditiveAngularMarginLoss(scale=0)
    with pytest.raises(ValueError, match="classes must be ≥ 2"):
        CosineLogits(1)


def test_a_tiny_model_learns_to_separate_classes_with_the_margin():
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1, (4, 8))
    labels = np.repeat(np.arange(4), 50)
    inputs = (centres[labels] + rng.normal(0, 0.3, (200, 8))).astype(np.float32)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Input((8,)), tf.keras.layers.Dense(16), CosineLogits(4)])
    loss = AdditiveAngularMarginLoss(margin=0.2)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=loss)
    model.fit(inputs, labels, epochs=30, batch_size=32, verbose=0)
    accuracy = float(np.mean(np.argmax(model.predict(inputs, verbose=0), axis=1) == labels))
    assert accuracy > 0.95
