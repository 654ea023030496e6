"""Speaker-embedding networks for speaker verification, in plain Keras, trained as speaker classifiers.

Two models of similar size (the same head, total parameter counts within 10 % of each other for 50 to 2000
speakers), so a comparison measures the architecture rather than the capacity:

- A, :func:`densenet_bilstm_embedder` (log-mel input): the keyword spotter's DenseNet-BiLSTM trunk under the same
  layer names, so a trained spotter's trunk transfers by name (:func:`transfer_trunk`, :func:`freeze_trunk`).
- B, :func:`tdnn_embedder` (MFCC input): an x-vector TDNN (Snyder et al. 2018): dilated 1-D convolutions over time,
  then 1×1 layers.

Both pool the frame-level states into their mean and standard deviation over time (:class:`StatisticsPooling`),
project to a linear ``embedding`` layer and end in ``speaker_cosines`` (:class:`CosineLogits`), to be trained with
:class:`AdditiveAngularMarginLoss`. Verification scores the L2-normalised output of :func:`embedding_model`.
Normalisation is LayerNormalization throughout: the Downpour parameter server serves trainable weights only.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import tensorflow as tf

from training.models.architecture import recorded, recorded_part
from training.workloads.kws_densenet_bilstm.model import densenet_bilstm_trunk
from training.workloads.speaker_verification.angular_margin import CosineLogits

layers = tf.keras.layers

EMBEDDING_DIM = 128
LOG_MEL_SHAPE = (98, 40)  # frames × bands: training.speech.audio.features.feature_shape("log_mel"), model A's input
MFCC_SHAPE = (98, 40)  # training.speech.audio.features.feature_shape("mfcc"), model B's input
POOLING_LAYER = "statistics_pooling"
EMBEDDING_LAYER = "embedding"
COSINE_LAYER = "speaker_cosines"

# Which trunk unit a layer belongs to, for freeze_trunk. Units are listed bottom-up in the model; freeze_trunk counts
# them from the top: bilstm, to_sequence, block3, transition2, block2, transition1, block1, stem (model A), or
# tdnn5 … tdnn1, stem (model B).
_UNIT_PATTERNS = (
    (re.compile(r"^(per_example_normalisation|add_channel|stem_)"), "stem"),
    (re.compile(r"^((?:block|transition|tdnn)\d+)_"), None),  # None: the unit is the matched prefix
    (re.compile(r"^(to_sequence_|sequence_|time_major$)"), "to_sequence"),
    (re.compile(r"^bilstm$"), "bilstm"),
)


@tf.keras.utils.register_keras_serializable(package="cloudburst")
class StatisticsPooling(tf.keras.layers.Layer):
    """(batch, time, channels) → (batch, 2 · channels): the mean and standard deviation over time, concatenated."""

    def __init__(self, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        mean, variance = tf.nn.moments(inputs, axes=[1])
        # The epsilon keeps the gradient of the square root finite on a channel that is constant over time.
        return tf.concat([mean, tf.sqrt(variance + self.epsilon)], axis=-1)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon}


@recorded
def densenet_bilstm_embedder(
    input_shape: tuple[int, int] = LOG_MEL_SHAPE,
    *,
    num_speakers: int,
    embedding_dim: int = EMBEDDING_DIM,
) -> tf.keras.Model:
    """Model A: log-mel (frames, bands) → the keyword spotter's DenseNet-BiLSTM trunk (defaults, same layer names) →
    statistics pooling → ``embedding`` → cosines to each of ``num_speakers`` speakers."""
    features = layers.Input(input_shape, name="features")
    sequence = densenet_bilstm_trunk(features)
    return _with_speaker_head(features, sequence, num_speakers, embedding_dim, name="densenet_bilstm_embedder")


@recorded
def tdnn_embedder(
    input_shape: tuple[int, int] = MFCC_SHAPE,
    *,
    num_speakers: int,
    embedding_dim: int = EMBEDDING_DIM,
    frame_channels: int = 128,
    kernel_sizes: tuple[int, ...] = (5, 3, 3, 1),
    dilations: tuple[int, ...] = (1, 2, 3, 1),
    pooling_channels: int = 256,
) -> tf.keras.Model:
    """Model B: MFCC (frames, coefficients) → x-vector TDNN (dilated convs over time, a 1×1 layer, then a wider 1×1
    layer to pool) → statistics pooling → ``embedding`` → cosines. The default widths match model A's size."""
    if len(kernel_sizes) != len(dilations):
        raise ValueError(f"kernel_sizes {kernel_sizes} and dilations {dilations} need one entry per TDNN layer")
    frames = input_shape[0]
    # "valid" convolutions, as in the x-vector: padded frames would bias the statistics towards zero.
    receptive_field = 1 + sum((kernel - 1) * dilation for kernel, dilation in zip(kernel_sizes, dilations, strict=True))
    if frames < receptive_field:
        raise ValueError(f"{frames} frames are fewer than the TDNN's receptive field of {receptive_field} frames; "
                         "use longer clips or smaller kernel_sizes/dilations")
    features = layers.Input(input_shape, name="features")
    # Cepstral mean and variance normalisation per example (no weights): normalised per coefficient over time,
    # because c0 (energy) dwarfs the higher coefficients; it also removes the channel's constant offset.
    x = layers.LayerNormalization(axis=1, center=False, scale=False, name="per_example_normalisation")(features)
    widths = [frame_channels] * len(kernel_sizes) + [pooling_channels]
    contexts = [*zip(kernel_sizes, dilations, strict=True), (1, 1)]
    for index, (width, (kernel, dilation)) in enumerate(zip(widths, contexts, strict=True), start=1):
        x = layers.Conv1D(width, kernel, dilation_rate=dilation, padding="valid", name=f"tdnn{index}_conv")(x)
        x = layers.ReLU(name=f"tdnn{index}_relu")(x)
        x = layers.LayerNormalization(name=f"tdnn{index}_norm")(x)
    return _with_speaker_head(features, x, num_speakers, embedding_dim, name="tdnn_embedder")


def _with_speaker_head(features: tf.Tensor, frame_states: tf.Tensor, num_speakers: int, embedding_dim: int,
                       name: str) -> tf.keras.Model:
    """The head both models share, so their parameter counts differ by the trunk only."""
    pooled = StatisticsPooling(name=POOLING_LAYER)(frame_states)
    # Linear: the x-vector takes its embedding before the nonlinearity; the cosine head normalises it anyway.
    embedding = layers.Dense(embedding_dim, name=EMBEDDING_LAYER)(pooled)
    cosines = CosineLogits(num_speakers, name=COSINE_LAYER)(embedding)
    return tf.keras.Model(features, cosines, name=name)


@recorded_part
def embedding_model(model: tf.keras.Model) -> tf.keras.Model:
    """Features → the ``embedding`` layer's output (unnormalised), sharing the weights of ``model``."""
    return tf.keras.Model(model.input, model.get_layer(EMBEDDING_LAYER).output, name=f"{model.name}_embedding")


def parameter_count(model: tf.keras.Model) -> int:
    """Every weight of the model, trainable or not."""
    return int(sum(np.prod(weight.shape) for weight in model.weights))


def trunk_layer_names(model: tf.keras.Model) -> list[str]:
    """The layers below statistics pooling, bottom-up, without the input: for model A, those shared with the
    keyword spotter."""
    names = [layer.name for layer in model.layers if not isinstance(layer, tf.keras.layers.InputLayer)]
    if POOLING_LAYER not in names:
        raise ValueError(f"model {model.name!r} has no {POOLING_LAYER!r} layer: not a speaker-embedding model")
    return names[: names.index(POOLING_LAYER)]


def trunk_units(model: tf.keras.Model) -> dict[str, list[str]]:
    """Trunk layer names grouped into units, top (closest to the output) first: the order :func:`freeze_trunk`
    counts in."""
    units: dict[str, list[str]] = {}
    for name in trunk_layer_names(model):
        units.setdefault(_unit_of(name), []).append(name)
    return dict(reversed(units.items()))


def _unit_of(layer_name: str) -> str:
    for pattern, unit in _UNIT_PATTERNS:
        match = pattern.match(layer_name)
        if match:
            return unit or match.group(1)
    raise ValueError(f"trunk layer {layer_name!r} belongs to no known unit; add its prefix to _UNIT_PATTERNS")


def transfer_trunk(source: tf.keras.Model, target: tf.keras.Model) -> list[str]:
    """Copy into the trunk of ``target`` the weights of every layer that ``source`` has under the same name with the
    same weight shapes (e.g. a trained keyword spotter's trunk into model A); returns the names of the layers copied.
    The head is never copied: a speaker model's ``speaker_cosines`` of the same size are not the same speakers."""
    source_names = {layer.name for layer in source.layers}
    copied = []
    for name in trunk_layer_names(target):
        layer = target.get_layer(name)
        if not layer.weights or name not in source_names:
            continue
        weights = source.get_layer(name).get_weights()
        if [weight.shape for weight in weights] == [tuple(weight.shape) for weight in layer.weights]:
            layer.set_weights(weights)
            copied.append(name)
    if not copied:
        raise ValueError(f"no layer of {source.name!r} matches a layer of {target.name!r} by name and weight shapes "
                         "(is the source a densenet_bilstm keyword spotter with the default trunk?)")
    return copied


def freeze_trunk(model: tf.keras.Model, trainable_blocks: int = 0) -> list[str]:
    """Make the trunk non-trainable except its top ``trainable_blocks`` units (see :func:`trunk_units`); the head
    stays trainable. Returns the frozen layer names. Compile afterwards: Keras reads ``trainable`` at compile time."""
    units = trunk_units(model)
    if not 0 <= trainable_blocks <= len(units):
        raise ValueError(f"trainable_blocks must be in [0, {len(units)}] for {model.name!r} "
                         f"(units top first: {', '.join(units)}), got {trainable_blocks}")
    frozen = []
    for position, names in enumerate(units.values()):
        for name in names:
            # Set both ways, so a second stage (more unfrozen blocks) can follow the first on the same model.
            model.get_layer(name).trainable = position < trainable_blocks
            if position >= trainable_blocks:
                frozen.append(name)
    return frozen
