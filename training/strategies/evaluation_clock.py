"""A Keras callback that evaluates several times per epoch and keeps a training clock without the evaluations,
so time-to-target is not rounded to whole epochs nor inflated by the evaluations themselves."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np
import tensorflow as tf

from training.strategies.bookkeeping import evaluation, evaluation_schedule, time_to_target

EVALUATION_BATCH = 2000


def predicted_classes(model: tf.keras.Model, images: np.ndarray) -> np.ndarray:
    """Class predictions in plain batched calls: no tf.data iterator to build and tear down each time."""
    predictions = [np.argmax(model(model_inputs(images[start : start + EVALUATION_BATCH]), training=False), axis=1)
                   for start in range(0, len(images), EVALUATION_BATCH)]
    return np.concatenate(predictions) if predictions else np.empty(0, np.int64)


def class_probabilities(model: tf.keras.Model, images: np.ndarray) -> np.ndarray:
    """Softmax over the model's outputs (logits, float32 whatever the precision), batched as predicted_classes."""
    batches = [tf.nn.softmax(tf.cast(model(model_inputs(images[start : start + EVALUATION_BATCH]),
                                               training=False), tf.float32)).numpy()
               for start in range(0, len(images), EVALUATION_BATCH)]
    return np.concatenate(batches) if batches else np.empty((0, model.output_shape[-1]), np.float32)


def correct_predictions(model: tf.keras.Model, images: np.ndarray, labels: np.ndarray) -> int:
    return int(np.sum(predicted_classes(model, images) == labels))


def model_inputs(images: np.ndarray | tf.Tensor) -> tf.Tensor:
    """Stored examples → float32 model inputs: uint8 pixels scaled to [0, 1], features (float16) only cast."""
    if images.dtype == tf.uint8 or images.dtype == np.uint8:
        return tf.cast(images, tf.float32) / 255.0
    return tf.cast(images, tf.float32)


class EvaluationClock(tf.keras.callbacks.Callback):
    """Evaluate at ``bookkeeping.evaluation_schedule(steps_per_epoch, evaluations_per_epoch)``, the last at the
    epoch's end. ``combine`` sums (correct, total) over workers (an all-reduce for synchronous strategies); each
    worker evaluates only its own slice of the evaluation set.

    ``evaluated_weights`` (e.g. :meth:`WeightAverage.swapped_in`) puts the weights to evaluate in the model for the
    length of each evaluation; the trained weights are then also evaluated at each epoch's end, as
    ``val_accuracy_trained_weights``, so a run shows what averaging gained.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, evaluations_per_epoch: int, steps_per_epoch: int,
                 target_accuracy: float, combine: Callable[[np.ndarray], np.ndarray],
                 clock_offset_seconds: float = 0.0,
                 evaluated_weights: Callable[[], AbstractContextManager[None]] | None = None) -> None:
        super().__init__()
        self.images, self.labels = images, labels
        self.steps_per_epoch = steps_per_epoch
        # The epoch's end is evaluated in on_epoch_end, after Keras finished the epoch.
        self.steps_within_epoch = set(evaluation_schedule(steps_per_epoch, evaluations_per_epoch)[:-1])
        self.target_accuracy = target_accuracy
        self.combine = combine
        self.evaluations: list[dict[str, float]] = []
        self.clock_offset_seconds = clock_offset_seconds
        self.evaluation_seconds = 0.0
        self.epoch = 0
        self.epoch_started = 0.0
        self.epoch_evaluation_seconds = 0.0
        self.started = 0.0
        self.evaluated_weights = evaluated_weights

    @property
    def time_to_target_seconds(self) -> float | None:
        return time_to_target(self.evaluations, self.target_accuracy)

    def training_seconds(self) -> float:
        return self.clock_offset_seconds + time.perf_counter() - self.started - self.evaluation_seconds

    def on_train_begin(self, logs=None) -> None:
        self.started = time.perf_counter()

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self.epoch = epoch
        self.epoch_started = time.perf_counter()
        self.epoch_evaluation_seconds = 0.0

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        step = batch + 1
        if step in self.steps_within_epoch:
            self.evaluate(self.epoch + step / self.steps_per_epoch)

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        accuracy = self.evaluate(epoch + 1.0)
        if logs is not None:
            logs["val_accuracy"] = accuracy
            if self.evaluated_weights is not None:
                logs["val_accuracy_trained_weights"] = self.accuracy(contextlib.nullcontext())
            logs["epoch_seconds"] = time.perf_counter() - self.epoch_started - self.epoch_evaluation_seconds

    def evaluate(self, position: float) -> float:
        clock = self.training_seconds()
        accuracy = self.accuracy(self.weights_to_evaluate())
        self.evaluations.append(evaluation(clock, position, accuracy))
        return accuracy

    def weights_to_evaluate(self) -> AbstractContextManager[None]:
        """The weights every evaluation measures, in the model for the block (the trained ones by default); other
        per-epoch measures use it too, so they see the same model."""
        return self.evaluated_weights() if self.evaluated_weights else contextlib.nullcontext()

    def accuracy(self, weights: AbstractContextManager[None]) -> float:
        """Test accuracy over every worker's slice with ``weights`` in the model; off the training clock."""
        started = time.perf_counter()
        with weights:
            local = np.array([correct_predictions(self.model, self.images, self.labels), len(self.labels)],
                             np.float64)
        correct, total = self.combine(local)
        spent = time.perf_counter() - started
        self.evaluation_seconds += spent
        self.epoch_evaluation_seconds += spent
        return float(correct / total)
