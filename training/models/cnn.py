"""A Simard-style convolutional network for MNIST (Simard, Steinkraus & Platt 2003), in plain Keras.

Two convolution + pooling stages and a small fully connected layer: the shape Simard et al. used with elastic
deformations, sized so that one CPU core trains several thousand images per second.
"""

from __future__ import annotations

import tensorflow as tf

from training.models.architecture import recorded


@recorded
def simard_cnn(input_shape: tuple[int, int, int] = (28, 28, 1), num_classes: int = 10,
               convolutions_per_stage: int = 1, dense_units: int = 128,
               batch_norm: bool = False) -> tf.keras.Model:
    """Conv(32, 3×3) → pool → Conv(64, 3×3) → pool → Dense(128) → logits; inputs are pixels scaled to [0, 1].

    ``convolutions_per_stage`` > 1 stacks that many 3×3 convolutions before each pooling (the deeper model of the
    ``full`` preset); ``dense_units`` sizes the fully connected layer. ``batch_norm`` puts batch normalization
    between every convolution and its ReLU (Ioffe & Szegedy 2015); those convolutions have no bias, since the
    normalization's shift takes its place.
    """
    if convolutions_per_stage < 1 or dense_units < 1:
        raise ValueError(f"convolutions_per_stage={convolutions_per_stage!r}, dense_units={dense_units!r}: "
                         "both must be at least 1")
    layers = tf.keras.layers
    stack: list[tf.keras.layers.Layer] = [layers.Input(input_shape)]
    for filters in (32, 64):
        for _ in range(convolutions_per_stage):
            if batch_norm:
                stack += [layers.Conv2D(filters, 3, use_bias=False), layers.BatchNormalization(), layers.ReLU()]
            else:
                stack.append(layers.Conv2D(filters, 3, activation="relu"))
        stack.append(layers.MaxPooling2D())
    stack += [layers.Flatten(), layers.Dropout(0.3), layers.Dense(dense_units, activation="relu"),
              layers.Dense(num_classes)]
    return tf.keras.Sequential(stack, name="simard_cnn")
