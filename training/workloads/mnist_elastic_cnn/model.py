"""A Simard-style convolutional network for MNIST (Simard, Steinkraus & Platt 2003), in plain Keras.

Two convolution + pooling stages and a small fully connected layer: the shape Simard et al. used with elastic
deformations, sized so that one CPU core trains several thousand images per second.
"""

from __future__ import annotations

import tensorflow as tf

from training.models.architecture import recorded
from training.workloads.mnist_elastic_cnn import IMAGE_SHAPE, NUM_CLASSES, SETTINGS

_SETTING_DEFAULTS = {setting.name: setting.default for setting in SETTINGS}


@recorded
def simard_cnn(input_shape: tuple[int, int, int] = (*IMAGE_SHAPE, 1), num_classes: int = NUM_CLASSES,
               convolutions_per_stage: int = _SETTING_DEFAULTS["convolutions_per_stage"],
               dense_units: int = _SETTING_DEFAULTS["dense_units"],
               batch_norm: bool = _SETTING_DEFAULTS["batch_norm"]) -> tf.keras.Model:
    """Conv(32, 3×3) → pool → Conv(64, 3×3) → pool → Dense(dense_units) → logits; inputs are pixels scaled to [0, 1].

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
