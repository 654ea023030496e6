"""An exponential moving average of a Keras model's weights (Polyak & Juditsky 1992), kept beside training.

Training is unchanged: the optimizer steps the model's own weights. After every step the average moves towards
them, ``average ← d·average + (1 − d)·weights``, and what is evaluated and saved as the model is the average,
which smooths out the last steps' noise (checkpoints keep both). The decay ramps up as ``min(d, t / (10 + t))``
over the updates t = 0, 1, … (TensorFlow's ExponentialMovingAverage with num_updates, shifted by one): the first update
copies the weights, so the average never holds the random initial weights, nor a rank's own ones before Horovod's
broadcast, and early evaluations follow training closely.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tensorflow as tf


def ramped_decay(decay: float, step: int) -> float:
    """The decay used at the ``step``-th update (counted from 0): ``min(decay, step / (10 + step))``."""
    return min(decay, step / (10.0 + step))


class WeightAverage(tf.keras.callbacks.Callback):
    """Keeps the average of ``model.weights`` in variables of its own (checkpoint them with the model).

    Place it after callbacks that change the weights at a step's end (Horovod's broadcast) and before those that
    evaluate, so they see this step's average.
    """

    def __init__(self, model: tf.keras.Model, decay: float) -> None:
        super().__init__()
        if not 0.0 < decay < 1.0:
            raise ValueError(f"weight average decay {decay!r}: must be between 0 and 1 (both excluded)")
        self.decay = decay
        self.averaged = [tf.Variable(weight, trainable=False, name=f"average_{index}")
                         for index, weight in enumerate(model.weights)]
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="average_updates")
        self._weights = list(model.weights)

    def state(self) -> dict[str, Any]:
        """The variables to checkpoint so a resumed run goes on averaging where it stopped."""
        return {"averaged": self.averaged, "updates": self.updates}

    @tf.function
    def _move_towards_weights(self, decay: tf.Tensor) -> None:
        for average, weight in zip(self.averaged, self._weights, strict=True):
            average.assign(decay * average + (1.0 - decay) * weight)
        self.updates.assign_add(1)

    def update(self) -> None:
        """One step's update (every weight here is float32)."""
        self._move_towards_weights(tf.constant(ramped_decay(self.decay, int(self.updates.numpy())), tf.float32))

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.update()

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the average inside the block and its trained weights again after it."""
        trained = [weight.numpy() for weight in self._weights]
        for weight, average in zip(self._weights, self.averaged, strict=True):
            weight.assign(average)
        try:
            yield
        finally:
            for weight, value in zip(self._weights, trained, strict=True):
                weight.assign(value)

    def install(self) -> None:
        """Leave the average in the model for good (the end of training: the saved model is the average)."""
        for weight, average in zip(self._weights, self.averaged, strict=True):
            weight.assign(average)
