"""A Simard-style convolutional network for MNIST (Simard, Steinkraus & Platt 2003), in plain Keras.

Two convolution + pooling stages and a small fully connected layer: the shape Simard et al. used with elastic
deformations, sized so that one CPU core trains several thousand images per second.
"""

from __future__ import annotations

import tensorflow as tf


def simard_cnn(input_shape: tuple[int, int, int] = (28, 28, 1), num_classes: int = 10) -> tf.keras.Model:
    """Conv(32, 3×3) → pool → Conv(64, 3×3) → pool → Dense(128) → logits; inputs are pixels scaled to [0, 1]."""
    layers = tf.keras.layers
    return tf.keras.Sequential(
        [
            layers.Input(input_shape),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dropout(0.3),
            layers.Dense(128, activation="relu"),
            layers.Dense(num_classes),
        ],
        name="simard_cnn",
    )
