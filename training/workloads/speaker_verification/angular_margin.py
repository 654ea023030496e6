"""Additive angular margin softmax (AAM, "ArcFace": Deng et al. 2019) for speaker-embedding training, in plain Keras.

The model ends in :class:`CosineLogits`: the cosine between the L2-normalised embedding and each speaker's
L2-normalised weight vector. :class:`AdditiveAngularMarginLoss` adds the margin m to the angle of the true class
only, scales every cosine by s and takes the softmax cross-entropy:

    loss = −log( e^{s·cos(θ_y + m)} / (e^{s·cos(θ_y + m)} + Σ_{j≠y} e^{s·cos θ_j}) )

Where θ_y + m would pass π, cos(θ_y + m) stops falling; ArcFace then uses cos θ_y − m·sin m instead, which keeps
the target logit decreasing in θ_y. The margin lives in the loss, not in the model, so the model's output at
inference is the plain cosine and embeddings are read from the layer before it. The margin is a variable the
training loop ramps (0 → m over the first epochs, :func:`ramped_margin`), because a full margin from the first step
keeps a randomly initialised network from learning.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

DEFAULT_SCALE = 30.0
DEFAULT_MARGIN = 0.2
COSINE_EPSILON = 1e-6


def ramped_margin(epoch: int, margin: float = DEFAULT_MARGIN, ramp_epochs: int = 4) -> float:
    """The margin for a (0-based) epoch: rising linearly from 0 in epoch 0 to ``margin`` from ``ramp_epochs`` on."""
    if ramp_epochs < 1:
        return margin
    return margin * min(1.0, epoch / ramp_epochs)


@tf.keras.utils.register_keras_serializable(package="cloudburst")
class CosineLogits(tf.keras.layers.Layer):
    """cos θ_j between the L2-normalised input and each class's L2-normalised weight column (no bias)."""

    def __init__(self, classes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if classes < 2:
            raise ValueError(f"classes must be ≥ 2, got {classes}")
        self.classes = classes

    def build(self, input_shape: Any) -> None:
        self.kernel = self.add_weight(name="kernel", shape=(int(input_shape[-1]), self.classes),
                                      initializer="glorot_uniform", trainable=True)
        super().build(input_shape)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return tf.matmul(tf.math.l2_normalize(inputs, axis=-1), tf.math.l2_normalize(self.kernel, axis=0))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "classes": self.classes}


class AdditiveAngularMarginLoss(tf.keras.losses.Loss):
    """Softmax cross-entropy of s·cos(θ_y + m) for the true class and s·cos θ_j for the others; ``y_pred`` are
    the cosines of :class:`CosineLogits`, ``y_true`` integer class labels. ``set_margin`` changes m between steps."""

    def __init__(self, scale: float = DEFAULT_SCALE, margin: float = DEFAULT_MARGIN, name: str = "aam_softmax",
                 **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.scale = float(scale)
        self.margin = tf.Variable(self._checked_margin(margin), trainable=False, dtype=tf.float32, name="margin")

    @staticmethod
    def _checked_margin(margin: float) -> float:
        if not 0 <= margin < math.pi / 2:
            raise ValueError(f"margin must be in [0, π/2), got {margin}")
        return float(margin)

    def set_margin(self, margin: float) -> None:
        self.margin.assign(self._checked_margin(margin))

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        cosines = tf.clip_by_value(tf.cast(y_pred, tf.float32), -1.0 + COSINE_EPSILON, 1.0 - COSINE_EPSILON)
        true_class = tf.cast(tf.one_hot(labels, tf.shape(cosines)[-1]), tf.bool)
        margin = self.margin
        with_margin = tf.cos(tf.acos(cosines) + margin)
        # Past θ + m = π the cosine would rise again: fall back to cos θ − m·sin m (ArcFace's monotonic form).
        with_margin = tf.where(cosines > tf.cos(math.pi - margin), with_margin, cosines - margin * tf.sin(margin))
        logits = self.scale * tf.where(true_class, with_margin, cosines)
        return tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": self.scale, "margin": float(self.margin.numpy())}
