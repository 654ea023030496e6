"""The optimizers a worker can train with, by name: one rule for every strategy's local steps (plain Keras and
Horovod ranks, averaging workers, Downpour workers between pushes). Their constants are declared here once; the
parameter server's NumPy rules (strategies/parameter_server/shards.py) use them too, so a Downpour worker's local
step and the server's step have one scale."""

from __future__ import annotations

from typing import Any

from training.settings import OPTIMIZERS

# Keras' defaults for momentum and Adam; Adagrad's accumulators start at INITIAL_ACCUMULATOR (the server's too). A
# test checks that the Keras optimizers and the server's agree step for step.
MOMENTUM = 0.9
ADAM_BETA_1, ADAM_BETA_2, ADAM_EPSILON = 0.9, 0.999, 1e-7
INITIAL_ACCUMULATOR = 0.1


def make_optimizer(name: str, learning_rate: float) -> Any:
    """A Keras 2 legacy optimizer (the ones Horovod 0.28 wraps reliably; TF ≥ 2.11 changed the new ones): adagrad,
    sgd, momentum (SGD, momentum 0.9) or adam (Keras' defaults). Keras adds 1e-7 to Adagrad's denominator
    (≥ sqrt(0.1)): a relative difference from the server's rule of at most 3e-7."""
    import tensorflow as tf

    if name == "adagrad":
        return tf.keras.optimizers.legacy.Adagrad(learning_rate, initial_accumulator_value=INITIAL_ACCUMULATOR)
    if name == "sgd":
        return tf.keras.optimizers.legacy.SGD(learning_rate)
    if name == "momentum":
        return tf.keras.optimizers.legacy.SGD(learning_rate, momentum=MOMENTUM)
    if name == "adam":
        return tf.keras.optimizers.legacy.Adam(learning_rate, beta_1=ADAM_BETA_1, beta_2=ADAM_BETA_2,
                                               epsilon=ADAM_EPSILON)
    raise ValueError(f"optimizer {name!r}: must be one of {', '.join(OPTIMIZERS)}")
