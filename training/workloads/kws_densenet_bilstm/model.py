"""DenseNet-BiLSTM keyword spotter (Zeng & Xiao 2019, "Effective combination of DenseNet and BiLSTM for keyword
spotting", IEEE Access 7), in plain Keras.

A small DenseNet ("DenseNet-Speech") extracts local time–frequency features; its transition layers pool the
frequency axis only, so the time axis survives as a sequence for a bidirectional LSTM; attention pooling over time
(as in the paper) feeds a linear classifier that returns logits. Block sizes and widths are chosen here to land
near the paper's 223k trainable parameters (213.6k with the defaults).

Deviations from the paper, and why:
- LayerNormalization (per position, over channels) where DenseNet uses batch normalisation: the Downpour strategy's
  parameter server serves trainable weights only, and batch norm's moving statistics are non-trainable state.
- The input map is normalised per example inside the model (zero mean, unit variance over the whole map, no
  weights), so features need no dataset statistics, and a log-mel map's gain (an additive constant) drops out.
- The stem convolution strides by 2 in time and 4 in frequency (kernel 3 × 8, so every band is seen): ~8× less
  convolution and normalisation work, which lets a 2-core machine train a few hundred clips per second; 49 steps
  of 20 ms are still finer than a phoneme.
"""

from __future__ import annotations

import tensorflow as tf

from training.models.architecture import recorded

layers = tf.keras.layers

DEFAULT_INPUT_SHAPE = (98, 40)  # frames × bands: training.speech.audio.features.feature_shape("log_mel")


@recorded
def densenet_bilstm(
    input_shape: tuple[int, int] = DEFAULT_INPUT_SHAPE,
    num_classes: int = 12,
    growth_rate: int = 12,
    block_layers: tuple[int, ...] = (2, 4, 4),
    stem_filters: int = 24,
    stem_kernel: tuple[int, int] = (3, 8),
    stem_strides: tuple[int, int] = (2, 4),
    compression: float = 0.5,
    sequence_channels: int = 64,
    lstm_units: int = 72,
    dropout: float = 0.2,
) -> tf.keras.Model:
    """Features (frames, bands) → stem conv → dense blocks with frequency-only transitions → BiLSTM → logits."""
    features = layers.Input(input_shape, name="features")
    x = densenet_bilstm_trunk(features, growth_rate=growth_rate, block_layers=block_layers, stem_filters=stem_filters,
                              stem_kernel=stem_kernel, stem_strides=stem_strides, compression=compression,
                              sequence_channels=sequence_channels, lstm_units=lstm_units)
    x = _attention_pooling(x, name="attention")
    x = layers.Dropout(dropout, name="dropout")(x)
    logits = layers.Dense(num_classes, name="logits")(x)
    return tf.keras.Model(features, logits, name="densenet_bilstm")


def densenet_bilstm_trunk(
    features: tf.Tensor,
    growth_rate: int = 12,
    block_layers: tuple[int, ...] = (2, 4, 4),
    stem_filters: int = 24,
    stem_kernel: tuple[int, int] = (3, 8),
    stem_strides: tuple[int, int] = (2, 4),
    compression: float = 0.5,
    sequence_channels: int = 64,
    lstm_units: int = 72,
) -> tf.Tensor:
    """Feature maps (batch, frames, bands) → BiLSTM states (batch, time, 2 · lstm_units): everything but the head.

    Shared by the keyword spotter and the speaker embedder (training.workloads.speaker_verification.speaker_embedding);
    the layer names are what lets a spotter's trunk be transferred by name, so keep them stable.
    """
    frames, bands = features.shape[1:]
    if any(kernel < stride for kernel, stride in zip(stem_kernel, stem_strides, strict=True)):
        raise ValueError(f"stem_kernel {stem_kernel} must be at least stem_strides {stem_strides} on each axis, "
                         "or the stem skips frames or bands")
    # No weights: center/scale off. Axes (1, 2) normalise each example's whole map at once.
    x = layers.LayerNormalization(axis=(1, 2), center=False, scale=False, name="per_example_normalisation")(features)
    x = layers.Reshape((frames, bands, 1), name="add_channel")(x)
    x = layers.Conv2D(stem_filters, stem_kernel, strides=stem_strides, padding="same", use_bias=False,
                      name="stem_conv")(x)
    for block, count in enumerate(block_layers, start=1):
        x = _dense_block(x, count, growth_rate, name=f"block{block}")
        if block < len(block_layers):
            x = _transition(x, int(x.shape[-1] * compression), name=f"transition{block}")
    # A last 1×1 "transition" without pooling fixes the width the LSTM sees, whatever the blocks produced.
    x = _norm_relu_conv(x, sequence_channels, 1, name="to_sequence")
    x = _norm_relu(x, name="sequence")
    x = layers.Reshape((x.shape[1], x.shape[2] * x.shape[3]), name="time_major")(x)
    return layers.Bidirectional(layers.LSTM(lstm_units, return_sequences=True), name="bilstm")(x)


def _norm_relu(x: tf.Tensor, name: str) -> tf.Tensor:
    x = layers.LayerNormalization(name=f"{name}_norm")(x)
    return layers.ReLU(name=f"{name}_relu")(x)


def _norm_relu_conv(x: tf.Tensor, filters: int, kernel_size: int, name: str) -> tf.Tensor:
    """DenseNet's composite function (norm → ReLU → conv); no conv bias, as in DenseNet: the next norm has an offset."""
    x = _norm_relu(x, name)
    return layers.Conv2D(filters, kernel_size, padding="same", use_bias=False, name=f"{name}_conv")(x)


def _dense_block(x: tf.Tensor, count: int, growth_rate: int, name: str) -> tf.Tensor:
    """Each layer sees the concatenation of every earlier feature map and adds ``growth_rate`` channels."""
    for layer in range(1, count + 1):
        new_features = _norm_relu_conv(x, growth_rate, 3, name=f"{name}_layer{layer}")
        x = layers.Concatenate(name=f"{name}_concat{layer}")([x, new_features])
    return x


def _transition(x: tf.Tensor, filters: int, name: str) -> tf.Tensor:
    """1×1 compression, then halve the frequency axis only: the time axis is the BiLSTM's sequence."""
    x = _norm_relu_conv(x, filters, 1, name=name)
    return layers.AveragePooling2D(pool_size=(1, 2), padding="same", name=f"{name}_pool")(x)


def _attention_pooling(sequence: tf.Tensor, name: str) -> tf.Tensor:
    """Weighted mean over time, with weights softmax(w·h_t + b) learned from the BiLSTM states."""
    scores = layers.Dense(1, name=f"{name}_score")(sequence)  # (batch, time, 1)
    weights = layers.Softmax(axis=1, name=f"{name}_weights")(scores)
    pooled = layers.Dot(axes=1, name=f"{name}_pool")([weights, sequence])  # (batch, 1, units)
    return layers.Flatten(name=f"{name}_flatten")(pooled)
