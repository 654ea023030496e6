"""A Downpour worker's copy of the model (``downpour_worker``): local steps that also accumulate their gradients for
the next push, and the parameters as one flat float32 vector, the parameter server's layout. Imported only inside
the worker processes (it loads TensorFlow)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


class Replica:
    """The model, its local optimizer and the gradient accumulated since the last push."""

    def __init__(self, model: tf.keras.Model, loss_function: Any, optimizer: Any) -> None:
        self.model, self.loss_function, self.optimizer = model, loss_function, optimizer
        self.variables = model.trainable_variables
        self.sizes = [int(np.prod(variable.shape)) for variable in self.variables]
        self.accumulated = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in self.variables]
        # A fetch arrives n_fetch steps after it was requested; the local steps taken meanwhile are not in it yet
        # (their gradients are pushed only now), so they are kept: parameters = fetched + (local now − local then).
        self.at_request = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in self.variables]

    @tf.function
    def train_step(self, images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """One local step; returns the batch's loss and its number of correct predictions."""
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            loss = self.loss_function(labels, logits)
        gradients = tape.gradient(loss, self.variables)
        for total, gradient in zip(self.accumulated, gradients, strict=True):
            total.assign_add(gradient)
        self.optimizer.apply_gradients(zip(gradients, self.variables, strict=True))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=labels.dtype), labels),
                                        tf.float32))
        return loss, correct

    @tf.function
    def take_accumulated(self) -> tf.Tensor:
        """The gradient accumulated since the last call, flat; the accumulator starts again from zero."""
        flat = tf.concat([tf.reshape(total, [-1]) for total in self.accumulated], axis=0)
        for total in self.accumulated:
            total.assign(tf.zeros_like(total))
        return flat

    @tf.function
    def set_parameters(self, flat: tf.Tensor) -> None:
        for variable, part in zip(self.variables, tf.split(flat, self.sizes), strict=True):
            variable.assign(tf.reshape(part, variable.shape))

    @tf.function
    def remember_parameters(self) -> None:
        """Note the parameters as a fetch is requested, for ``apply_fetched``."""
        for saved, variable in zip(self.at_request, self.variables, strict=True):
            saved.assign(variable)

    @tf.function
    def apply_fetched(self, flat: tf.Tensor) -> None:
        for variable, saved, part in zip(self.variables, self.at_request, tf.split(flat, self.sizes), strict=True):
            variable.assign(tf.reshape(part, variable.shape) + variable - saved)

    @tf.function
    def parameters(self) -> tf.Tensor:
        return tf.concat([tf.reshape(variable, [-1]) for variable in self.variables], axis=0)


def mean_loss_and_accuracy(losses: list[tf.Tensor], corrects: list[tf.Tensor], examples: int) -> tuple[float, float]:
    """An epoch's mean batch loss and its accuracy over ``examples``, from ``Replica.train_step``'s returns."""
    return float(tf.reduce_mean(losses)), float(tf.reduce_sum(corrects)) / examples
