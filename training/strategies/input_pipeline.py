"""The training input pipeline every strategy feeds its workers with: in-memory shard arrays → tf.data batches."""

from __future__ import annotations

from typing import Any

SHUFFLE_BUFFER = 10_000


def training_dataset(images: Any, labels: Any, batch_size: int, seed: int) -> Any:
    """An endless, reshuffled stream of (scaled images, labels) batches from in-memory arrays."""
    import tensorflow as tf

    from training.strategies.evaluation_clock import model_inputs

    # No autotuning: its model thread sleeps up to a minute, and tearing the iterator down at the end of fit()
    # waits for it (measured: 8–35 s lost per run). The pipeline's parallelism is fixed anyway.
    options = tf.data.Options()
    options.autotune.enabled = False
    return (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(min(SHUFFLE_BUFFER, len(labels)), seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .map(lambda x, y: (model_inputs(x), y), num_parallel_calls=1)
        .prefetch(2)
        .with_options(options)
    )
