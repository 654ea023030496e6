"""DenseNet-BiLSTM keyword spotter: its size, that it carries no non-trainable state (Downpour serves trainable
weights only), that it survives the project's .h5 save, and that it learns from real log-mel features of
synthetic clips."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from training.models import model_files
from training.speech.audio import features
from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

RATE = 16_000
PAPER_PARAMETERS = 223_000  # Zeng & Xiao 2019, trainable parameters

pytestmark = [
    # Keras 2.15's own seeding calls random.randint(1, 1e9) once tf.keras.utils.set_random_seed has run.
    pytest.mark.filterwarnings("ignore:non-integer arguments to randrange:DeprecationWarning"),
]


def chirps(start_hz: float, end_hz: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` one-second int16 sweeps from ~start_hz to ~end_hz with random gain, jitter, onset and noise."""
    time = np.arange(RATE) / RATE
    clips = []
    for _ in range(count):
        low, high = start_hz * rng.uniform(0.9, 1.1), end_hz * rng.uniform(0.9, 1.1)
        onset, length = rng.uniform(0.0, 0.3), rng.uniform(0.4, 0.6)
        local = np.clip((time - onset) / length, 0.0, 1.0)
        # Phase is the integral of a frequency that moves linearly from low to high during the sweep.
        phase = 2 * np.pi * (low * local + (high - low) * local**2 / 2) * length
        envelope = np.sin(np.pi * local) ** 2
        wave = rng.uniform(0.05, 0.5) * envelope * np.sin(phase) + rng.normal(0.0, 0.003, RATE)
        clips.append(np.clip(np.rint(wave * 32767), -32768, 32767).astype(np.int16))
    return np.stack(clips)


def labelled_features(sweeps: list[tuple[float, float]], per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    clips = np.concatenate([chirps(low, high, per_class, rng) for low, high in sweeps])
    labels = np.repeat(np.arange(len(sweeps)), per_class)
    return features.compute_features(clips), labels


def compiled(model: tf.keras.Model, learning_rate: float = 1e-3) -> tf.keras.Model:
    model.compile(tf.keras.optimizers.Adam(learning_rate),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(0)
    return densenet_bilstm()


def test_default_model_takes_a_log_mel_map_and_returns_12_logits(model):
    assert model.input_shape == (None, *features.feature_shape("log_mel"))
    assert model.output_shape == (None, 12)
    assert model.layers[-1].get_config()["activation"] == "linear"  # logits: the loss applies the softmax


def test_35_class_head_changes_only_the_classifier(model):
    wide = densenet_bilstm(num_classes=35)
    assert wide.output_shape == (None, 35)
    classifier_inputs = model.get_layer("logits").input_shape[-1]
    assert wide.count_params() - model.count_params() == (35 - 12) * (classifier_inputs + 1)


def test_parameter_count_is_within_15_percent_of_the_papers_223k(model):
    assert 0.85 * PAPER_PARAMETERS <= model.count_params() <= 1.15 * PAPER_PARAMETERS


def test_every_weight_is_trainable_so_downpour_can_serve_the_model(model):
    assert model.non_trainable_weights == []
    assert not any(isinstance(layer, tf.keras.layers.BatchNormalization) for layer in model.layers)


def test_the_input_normalisation_makes_the_output_independent_of_gain(model):
    """log(gain² · power) = log(power) + const: the per-example normalisation removes the constant."""
    mel_map = np.random.default_rng(0).normal(-6.0, 2.0, (1, *model.input_shape[1:])).astype(np.float32)
    np.testing.assert_allclose(model(mel_map + 3.0, training=False), model(mel_map, training=False), atol=1e-4)


def test_saved_as_weights_and_rebuilt_it_predicts_the_same(model, tmp_path):
    mel_map = np.random.default_rng(1).normal(-6.0, 2.0, (2, *model.input_shape[1:])).astype(np.float32)
    model_files.save_model(str(tmp_path / "model"), model)
    loaded = model_files.load_model(str(tmp_path / "model"))
    np.testing.assert_allclose(loaded(mel_map, training=False), model(mel_map, training=False), atol=1e-5)


def test_one_step_on_real_features_gives_a_finite_loss_and_moves_every_weight():
    tf.keras.utils.set_random_seed(1)
    mel_maps, labels = labelled_features([(300, 900), (2500, 1200), (4000, 5000)], per_class=4, seed=1)
    model = compiled(densenet_bilstm(num_classes=3))
    before = [weight.copy() for weight in model.get_weights()]
    history = model.fit(mel_maps, labels, batch_size=len(labels), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = model.get_weights()
    assert all(not np.array_equal(old, new) for old, new in zip(before, after, strict=True))


def test_three_kinds_of_sweep_are_learned_well_above_chance():
    tf.keras.utils.set_random_seed(2)
    sweeps = [(300, 900), (2500, 1200), (4000, 5000)]
    train_maps, train_labels = labelled_features(sweeps, per_class=16, seed=2)
    test_maps, test_labels = labelled_features(sweeps, per_class=8, seed=3)
    model = compiled(densenet_bilstm(num_classes=3))
    model.fit(train_maps, train_labels, batch_size=8, epochs=6, verbose=0)
    _, train_accuracy = model.evaluate(train_maps, train_labels, verbose=0)
    _, test_accuracy = model.evaluate(test_maps, test_labels, verbose=0)
    assert train_accuracy >= 0.9, train_accuracy  # chance is 1/3
    assert test_accuracy >= 0.8, test_accuracy
