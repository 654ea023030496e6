"""Speaker-embedding models: their outputs, that the two are of similar size, that model A's trunk is the keyword
spotter's (transfer and freeze by name), that AAM training lowers the loss, and the .keras round trip."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from training.speech.audio import features  # noqa: E402  (after the TensorFlow skip)
from training.workloads.kws_densenet_bilstm.model import densenet_bilstm  # noqa: E402
from training.workloads.speaker_verification.angular_margin import AdditiveAngularMarginLoss  # noqa: E402
from training.workloads.speaker_verification.speaker_embedding import (  # noqa: E402
    EMBEDDING_DIM,
    LOG_MEL_SHAPE,
    MFCC_SHAPE,
    StatisticsPooling,
    densenet_bilstm_embedder,
    embedding_model,
    freeze_trunk,
    parameter_count,
    tdnn_embedder,
    transfer_trunk,
    trunk_layer_names,
    trunk_units,
)

SPEAKERS = 8
HEAD = {"statistics_pooling", "embedding", "speaker_cosines"}
KWS_HEAD = ["attention_score", "attention_weights", "attention_pool", "attention_flatten", "dropout", "logits"]
BUILDERS = {"densenet_bilstm": densenet_bilstm_embedder, "tdnn": tdnn_embedder}

pytestmark = [
    # Keras 2.15's own seeding calls random.randint(1, 1e9) once tf.keras.utils.set_random_seed has run.
    pytest.mark.filterwarnings("ignore:non-integer arguments to randrange:DeprecationWarning"),
]


def feature_maps(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(-6.0, 2.0, (count, *LOG_MEL_SHAPE)).astype(np.float32)


def build(kind: str, num_speakers: int = SPEAKERS, seed: int = 0) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(seed)
    return BUILDERS[kind](num_speakers=num_speakers)


def trainable_layer_names(model: tf.keras.Model) -> set[str]:
    return {layer.name for layer in model.layers if layer.trainable_weights}


@pytest.fixture(scope="module")
def untouched() -> dict[str, tf.keras.Model]:
    """One model of each kind, built once and shared by the tests that neither train nor transfer into it."""
    return {kind: build(kind) for kind in BUILDERS}


@pytest.fixture(params=sorted(BUILDERS))
def model(request, untouched) -> tf.keras.Model:
    return untouched[request.param]


@pytest.fixture(scope="module")
def spotter() -> tf.keras.Model:
    """A 12-keyword spotter with random values in every weight (LayerNorm's ones and zeros too)."""
    spotter = densenet_bilstm(num_classes=12)
    rng = np.random.default_rng(7)
    spotter.set_weights([rng.normal(0.0, 0.1, weight.shape).astype(np.float32) for weight in spotter.get_weights()])
    return spotter


def test_inputs_are_the_feature_maps_of_one_clip():
    assert LOG_MEL_SHAPE == features.feature_shape("log_mel")
    assert MFCC_SHAPE == features.feature_shape("mfcc")


def test_the_output_is_one_cosine_per_speaker(model):
    cosines = model(feature_maps(3, seed=1), training=False).numpy()
    assert cosines.shape == (3, SPEAKERS)
    assert np.all(np.abs(cosines) <= 1.0 + 1e-6)


def test_the_embedding_model_returns_128_dimensions_from_the_same_weights(model):
    embedder = embedding_model(model)
    assert embedder.output_shape == (None, EMBEDDING_DIM) and EMBEDDING_DIM == 128
    assert embedder(feature_maps(2, seed=2), training=False).shape == (2, 128)
    assert parameter_count(model) - parameter_count(embedder) == 128 * SPEAKERS  # only the cosine head is left out


def test_every_weight_is_trainable_so_downpour_can_serve_the_model(model):
    assert model.non_trainable_weights == []
    assert parameter_count(model) == model.count_params()


@pytest.mark.parametrize("num_speakers", [50, 240, 2000])
def test_the_two_models_are_within_10_percent_in_size(num_speakers):
    densenet = parameter_count(build("densenet_bilstm", num_speakers))
    tdnn = parameter_count(build("tdnn", num_speakers))
    message = f"{num_speakers} speakers: densenet_bilstm {densenet:,}, tdnn {tdnn:,} ({tdnn / densenet - 1:+.1%})"
    assert abs(tdnn - densenet) <= 0.1 * min(tdnn, densenet), message


def test_model_a_trunk_is_the_keyword_spotters_trunk_under_the_same_names(spotter, untouched):
    embedder = untouched["densenet_bilstm"]
    trunk = trunk_layer_names(embedder)
    # The spotter is exactly input + that trunk + its own head: the shared trunk function left it as it was.
    assert [layer.name for layer in spotter.layers] == ["features", *trunk, *KWS_HEAD]
    trunk_parameters = sum(embedder.get_layer(name).count_params() for name in trunk)
    head_parameters = sum(spotter.get_layer(name).count_params() for name in KWS_HEAD)
    assert spotter.count_params() == trunk_parameters + head_parameters
    assert not HEAD & set(trunk)


def test_transfer_copies_the_spotters_trunk_and_leaves_the_head_alone(spotter):
    embedder = build("densenet_bilstm")
    head_before = {name: embedder.get_layer(name).get_weights() for name in ("embedding", "speaker_cosines")}
    copied = transfer_trunk(spotter, embedder)
    with_weights = [name for name in trunk_layer_names(embedder) if embedder.get_layer(name).weights]
    assert copied == with_weights and "bilstm" in copied and "stem_conv" in copied
    for name in copied:
        for ours, theirs in zip(embedder.get_layer(name).get_weights(), spotter.get_layer(name).get_weights(),
                                strict=True):
            np.testing.assert_array_equal(ours, theirs)
    for name, weights in head_before.items():
        for before, after in zip(weights, embedder.get_layer(name).get_weights(), strict=True):
            np.testing.assert_array_equal(before, after)


def test_transfer_refuses_a_source_that_is_not_a_keyword_spotter(untouched):
    with pytest.raises(ValueError, match="no layer of 'tdnn_embedder' matches"):
        transfer_trunk(untouched["tdnn"], untouched["densenet_bilstm"])
    with pytest.raises(ValueError, match="no layer of 'densenet_bilstm_embedder' matches"):
        transfer_trunk(untouched["densenet_bilstm"], untouched["tdnn"])


def test_freezing_leaves_the_head_and_then_the_top_block_trainable():
    embedder = build("densenet_bilstm")
    assert list(trunk_units(embedder))[:3] == ["bilstm", "to_sequence", "block3"]
    assert list(trunk_units(embedder))[-1] == "stem"
    freeze_trunk(embedder, trainable_blocks=0)
    assert trainable_layer_names(embedder) == {"embedding", "speaker_cosines"}
    freeze_trunk(embedder, trainable_blocks=1)
    assert trainable_layer_names(embedder) == {"bilstm", "embedding", "speaker_cosines"}
    with pytest.raises(ValueError, match="trainable_blocks must be in"):
        freeze_trunk(embedder, trainable_blocks=99)


def test_a_frozen_trunk_does_not_move_in_training():
    embedder = build("tdnn")
    freeze_trunk(embedder)
    embedder.compile(tf.keras.optimizers.Adam(1e-2), AdditiveAngularMarginLoss(margin=0.1))
    trunk_before = [embedder.get_layer(name).get_weights() for name in trunk_layer_names(embedder)]
    head_before = embedder.get_layer("embedding").get_weights()[0]
    embedder.train_on_batch(feature_maps(4, seed=3), np.arange(4))
    for name, before in zip(trunk_layer_names(embedder), trunk_before, strict=True):
        for old, new in zip(before, embedder.get_layer(name).get_weights(), strict=True):
            np.testing.assert_array_equal(old, new)
    assert not np.array_equal(head_before, embedder.get_layer("embedding").get_weights()[0])


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_few_angular_margin_steps_lower_the_loss(kind):
    embedder = build(kind, seed=4)
    embedder.compile(tf.keras.optimizers.Adam(1e-3), AdditiveAngularMarginLoss(margin=0.1))
    maps, speakers = feature_maps(16, seed=4), np.repeat(np.arange(SPEAKERS), 2)
    losses = [float(embedder.train_on_batch(maps, speakers)) for _ in range(12)]
    assert np.all(np.isfinite(losses))
    # The last two steps' mean: Adam's first steps wobble, and one step is noisy with 16 examples.
    assert np.mean(losses[-2:]) < 0.85 * losses[0], losses


def test_statistics_pooling_is_the_mean_and_standard_deviation_over_time():
    sequence = np.array([[[1.0, 0.0], [3.0, 0.0], [5.0, 0.0], [7.0, 0.0]]], np.float32)  # (1, time 4, channels 2)
    pooled = StatisticsPooling(epsilon=0.0)(sequence).numpy()
    np.testing.assert_allclose(pooled, [[4.0, 0.0, np.sqrt(5.0), 0.0]], rtol=1e-6)  # variance of 1,3,5,7 is 5


def test_the_tdnn_refuses_clips_shorter_than_its_context():
    with pytest.raises(ValueError, match="receptive field of 15 frames"):
        tdnn_embedder((10, 40), num_speakers=SPEAKERS)


def test_saved_as_weights_and_rebuilt_or_cloned_it_is_the_same_model(model, tmp_path):
    from training.models import model_files

    maps = feature_maps(2, seed=5)
    model_files.save_model(str(tmp_path / "speaker"), model)
    loaded = model_files.load_model(str(tmp_path / "speaker"))
    np.testing.assert_allclose(loaded(maps, training=False), model(maps, training=False), atol=1e-5)
    model_files.save_model(str(tmp_path / "embedder"), embedding_model(model))  # the part alone, rebuilt as one
    embedder = model_files.load_model(str(tmp_path / "embedder"))
    np.testing.assert_allclose(embedder(maps, training=False), embedding_model(model)(maps, training=False), atol=1e-5)
    clone = tf.keras.models.clone_model(model)
    assert [layer.name for layer in clone.layers] == [layer.name for layer in model.layers]
    assert parameter_count(clone) == parameter_count(model)
