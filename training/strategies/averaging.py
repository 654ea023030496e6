"""MapReduce-style model averaging: in every round each worker trains on its part of its shard, starting from the
broadcast weights (a Spark ``mapPartitions`` task per worker), and the driver averages the returned weights
weighted by the examples each worker saw, then broadcasts the average again.

Weighting by examples seen matters when shards differ in size: Elephas' synchronous mode divides by the wrong
count. Only weights travel: each worker's optimizer state stays in its Spark Python worker between rounds (a
rescheduled task starts with a fresh one), as in local-SGD model averaging.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from training.strategies.base import TrainingResult
from training.strategies.placement import cores_per_node, threads_per_worker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)


def weighted_average(weight_sets: Sequence[Sequence[np.ndarray]], examples_seen: Sequence[int]) -> list[np.ndarray]:
    """Average each weight tensor over workers, worker i counting examples_seen[i] / total (computed in float64)."""
    if len(weight_sets) != len(examples_seen) or not weight_sets:
        raise ValueError(f"{len(weight_sets)} weight sets for {len(examples_seen)} example counts")
    total = float(sum(examples_seen))
    if total <= 0 or min(examples_seen) < 0:
        raise ValueError(f"example counts must be ≥ 0 with a positive total, got {list(examples_seen)}")
    averaged = []
    for tensors in zip(*weight_sets, strict=True):
        mean = sum(np.asarray(tensor, np.float64) * (count / total)
                   for tensor, count in zip(tensors, examples_seen, strict=True))
        averaged.append(mean.astype(tensors[0].dtype))
    return averaged


# Spark reuses its Python workers: a worker's data and compiled model are kept between the rounds of one run.
# Keyed by the whole run specification, so a later run in the same process never inherits another run's model,
# learning rate or optimizer state.
_worker_state: dict[tuple[str, int], Any] = {}
_threads_configured: list[int] = []


def _worker_round(partitions: Iterator[int], spec_mapping: dict[str, Any], shards_uri: str, weights: Any,
                  epoch: int, round_index: int, threads: int) -> Iterator[dict[str, Any]]:
    """Train one worker for one round from the broadcast weights; yields its weights and what it saw."""
    import tensorflow as tf

    from training.config import RunSpec
    from training.strategies.input_pipeline import training_dataset
    from training.workloads import workload_for

    spec = RunSpec.from_mapping(spec_mapping)
    for rank in partitions:
        key = (f"{spec.to_json()}|{shards_uri}", rank)
        if key not in _worker_state:
            if not _threads_configured:  # TensorFlow's pools can only be sized before first use in a process
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(1)
                tf.get_logger().setLevel("ERROR")
                _threads_configured.append(threads)
            for stale in [other for other in _worker_state if other[0] != key[0]]:
                del _worker_state[stale]  # another run's model and data: free them
            workload = workload_for(spec)
            images, labels = workload.load_shard(shards_uri, rank, spec.total_workers)
            model = workload.build_model()
            model.compile(optimizer=workload.make_optimizer(spec.learning_rate), loss=workload.make_loss(),
                          metrics=["accuracy"])
            _worker_state[key] = (workload, images, labels, model)
        workload, images, labels, model = _worker_state[key]
        # This round's part of the shard, from an order reshuffled every epoch.
        order = np.random.default_rng([spec.seed, rank, epoch]).permutation(len(labels))
        part = np.array_split(order, spec.evaluations_per_epoch)[round_index]
        steps = len(part) // spec.batch_size_per_worker
        model.set_weights(weights.value)
        started = time.perf_counter()
        history = model.fit(training_dataset(images[part], labels[part], spec.batch_size_per_worker,
                                             seed=spec.seed + rank + epoch), epochs=1, steps_per_epoch=steps,
                            verbose=0)
        yield {"rank": rank, "weights": model.get_weights(), "examples": steps * spec.batch_size_per_worker,
               "loss": float(history.history["loss"][-1]), "accuracy": float(history.history["accuracy"][-1]),
               "seconds": time.perf_counter() - started}


class AveragingStrategy:
    """Synchronous rounds of local training + example-weighted averaging, on plain Spark tasks."""

    name = "averaging"

    def train(self, spec: RunSpec, shards_uri: str, test_uri: str, run_uri: str,
              spark: SparkSession) -> TrainingResult:
        import tensorflow as tf

        from training.strategies.checkpoints import CheckpointStore, save_model
        from training.strategies.evaluation_clock import correct_predictions
        from training.workloads import workload_for

        started = time.perf_counter()
        workload = workload_for(spec)
        model = workload.build_model()
        test_images, test_labels = workload.load_test(test_uri)
        checkpoints = CheckpointStore(run_uri)
        checkpoint = tf.train.Checkpoint(model=model)
        resumed_from = checkpoints.latest_epoch()
        history = {"epochs": [], "evaluations": [], "training_seconds": 0.0, "time_to_target_seconds": None,
                   "bytes_moved": 0}
        if resumed_from:
            history = {**history, **checkpoints.restore(resumed_from, checkpoint)}
            log.info("resuming after epoch %d from %s", resumed_from, checkpoints.where.uri)
        weights = model.get_weights()
        weight_bytes = sum(tensor.nbytes for tensor in weights)
        threads = threads_per_worker(spec, cores_per_node(spark, spec))
        context = spark.sparkContext
        clock = history["training_seconds"]
        for epoch in range(resumed_from, spec.epochs):
            epoch_seconds, examples, losses, accuracies = 0.0, 0, [], []
            for round_index in range(spec.evaluations_per_epoch):
                round_started = time.perf_counter()
                broadcast = context.broadcast(weights)
                task = functools.partial(_worker_round, spec_mapping=spec.to_mapping(), shards_uri=shards_uri,
                                         weights=broadcast, epoch=epoch, round_index=round_index, threads=threads)
                results = context.parallelize(range(spec.total_workers), spec.total_workers) \
                    .mapPartitions(task).collect()
                broadcast.unpersist()
                counts = [result["examples"] for result in results]
                weights = weighted_average([result["weights"] for result in results], counts)
                seconds = time.perf_counter() - round_started
                epoch_seconds += seconds
                clock += seconds
                examples += sum(counts)
                losses += [(result["loss"], result["examples"]) for result in results]
                accuracies += [(result["accuracy"], result["examples"]) for result in results]
                history["bytes_moved"] += 2 * weight_bytes * spec.total_workers  # broadcast down, results up
                model.set_weights(weights)
                accuracy = correct_predictions(model, test_images, test_labels) / len(test_labels)
                history["evaluations"].append({"train_seconds": clock, "val_accuracy": accuracy,
                                               "epoch": epoch + (round_index + 1) / spec.evaluations_per_epoch})
                if history["time_to_target_seconds"] is None and accuracy >= spec.target_accuracy:
                    history["time_to_target_seconds"] = clock
            row = {"epoch": epoch + 1, "train_loss": _weighted_mean(losses),
                   "train_accuracy": _weighted_mean(accuracies), "val_accuracy": accuracy,
                   "epoch_seconds": epoch_seconds, "samples_per_second": examples / epoch_seconds}
            history["epochs"].append(row)
            history["training_seconds"] = clock
            log.info("[averaging] epoch %d/%d: loss %.4f accuracy %.4f val_accuracy %.4f %.1f s %.0f samples/s",
                     epoch + 1, spec.epochs, row["train_loss"], row["train_accuracy"], row["val_accuracy"],
                     epoch_seconds, row["samples_per_second"])
            checkpoints.save(epoch + 1, checkpoint, history)
        return TrainingResult(
            epochs=history["epochs"], evaluations=history["evaluations"],
            wall_seconds=time.perf_counter() - started, training_seconds=history["training_seconds"],
            time_to_target_seconds=history["time_to_target_seconds"], model_uri=save_model(run_uri, model),
            total_workers=spec.total_workers, resumed_from_epoch=resumed_from,
            extra={"threads_per_worker": threads, "rounds_per_epoch": spec.evaluations_per_epoch},
            metrics={"bytes_moved": history["bytes_moved"]},
        )


def _weighted_mean(values_and_weights: list[tuple[float, int]]) -> float:
    total = sum(weight for _, weight in values_and_weights)
    return sum(value * weight for value, weight in values_and_weights) / total
