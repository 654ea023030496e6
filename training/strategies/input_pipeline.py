"""The training input pipeline every strategy feeds its workers with: in-memory shard arrays → tf.data batches,
with the workload's online augmentation (if any) applied to every batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SHUFFLE_BUFFER = 10_000
# Seeds of the online augmentation: (run seed · this + worker rank, batch number) — distinct per worker and step.
WORKER_SEED_STRIDE = 100_003


def training_dataset(images: Any, labels: Any, batch_size: int, seed: int,
                     augment: Callable[[Any, Any], Any] | None = None, augment_seed: tuple[int, int] = (0, 0),
                     first_batch: int = 0) -> Any:
    """An endless, reshuffled stream of (scaled images, labels) batches from in-memory arrays.

    ``augment(batch, seed)`` (a workload's online augmentation) is applied to every batch with the stateless seed
    ``(augment_seed[0] · WORKER_SEED_STRIDE + augment_seed[1], first_batch + n)`` for the n-th batch: pass the run's
    seed and the worker's rank, and the number of batches trained before this stream starts (after a resume, or in
    a later round), so every epoch draws afresh and a rerun draws the same.
    """
    import tensorflow as tf

    from training.strategies.evaluation_clock import model_inputs

    # No autotuning: its model thread sleeps up to a minute, and tearing the iterator down at the end of fit()
    # waits for it (measured: 8–35 s lost per run). The pipeline's parallelism is fixed anyway.
    options = tf.data.Options()
    options.autotune.enabled = False
    batches = (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(min(SHUFFLE_BUFFER, len(labels)), seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
    )
    if augment is None:
        batches = batches.map(lambda x, y: (model_inputs(x), y), num_parallel_calls=1)
    else:
        worker_seed = augment_seed[0] * WORKER_SEED_STRIDE + augment_seed[1]

        def augmented(number: Any, batch: tuple[Any, Any]) -> tuple[Any, Any]:
            x, y = batch
            return augment(model_inputs(x), tf.stack([tf.constant(worker_seed, tf.int64), number])), y

        batches = batches.enumerate(start=first_batch).map(augmented, num_parallel_calls=1)
    return batches.prefetch(2).with_options(options)
