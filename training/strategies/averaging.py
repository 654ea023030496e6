"""MapReduce-style model averaging: in every round each worker trains on its part of its shard, starting from the
broadcast weights (a Spark ``mapPartitions`` task per worker), and the driver averages the returned weights
weighted by the examples each worker saw, then broadcasts the average again.

Weighting by examples seen matters when shards differ in size: Elephas' synchronous mode divides by the wrong
count. Only weights travel: each worker's optimizer state stays in its Spark Python worker between rounds (a
rescheduled task starts with a fresh one), as in local-SGD model averaging.

With ``communication`` off (the ceiling) the rounds run as they do with it, but the driver sends no weights and
averages nothing: each worker continues from the model its Spark Python worker kept from its last round, and only
worker 0's weights come back, to be evaluated. What still travels, and why: Spark's tasks and their small results
each round (the rounds are Spark jobs), worker 0's weights each round (the evaluated model lives in the driver; not
counted in bytes_moved but in evaluation_bytes), and, in the first round of a resumed run, the checkpoint's
weights to every worker (counted). Spark does not promise that a rank's next task runs in the Python worker that
ran its last one (local mode rotates through its idle Python workers often: 4–10 of a test's 14 rank-rounds), so
each rank also leaves its weights in its executor's Spark files directory after every round, as an independent
process would keep its model: a Python worker that did not train the rank's last round goes on from there. Only a
task moved to another executor finds nothing and goes on from the model its Python worker holds (the initial
weights or an older round's); the run counts those in ``worker_rounds_not_continued``. Writing a few MB to local
disk costs far less than the broadcast it stands for, so the ceiling stays an upper bound.

What is trained and what is measured are separate settings: an epoch is ``rounds_per_epoch`` rounds, each on the
next 1/rounds_per_epoch of every worker's reshuffled shard, whatever ``evaluations_per_epoch`` says. Accuracy is
measured after the round in which each of the ``evaluations_per_epoch`` evenly spaced points falls
(``bookkeeping.evaluation_schedule``), so the last round of every epoch is always evaluated.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training.models.optimizers import make_optimizer
from training.strategies import bookkeeping
from training.strategies.base import EvaluationSet, TrainingResult
from training.strategies.placement import configure_tensorflow_threads, cores_per_node, threads_per_worker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

# (weights or None when none are sent, epoch, round index) → one result per worker: {"rank", "weights", "examples",
# "loss", "accuracy", …}
# Online augmentation numbers a worker's batches on across rounds: round r of epoch e starts at batch
# (e · rounds_per_epoch + r) · ROUND_BATCHES, more than any round trains, so no two rounds share seeds.
ROUND_BATCHES = 1_000_000
RoundRunner = Callable[[list[np.ndarray] | None, int, int], list[dict[str, Any]]]


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


@dataclass
class WorkerState:
    """What a Spark Python worker keeps of one rank between rounds."""

    workload: Any
    images: np.ndarray
    labels: np.ndarray
    model: Any
    last_round: int | None = None  # epoch · rounds_per_epoch + round index of the round it last trained


class RankWeightsFile:
    """Where a rank leaves its weights after each round of a ceiling run, in the executor's Spark files directory
    (Spark deletes it with the application): another Python worker of the same executor continues from it."""

    def __init__(self, run_key: str, rank: int) -> None:
        from pyspark import SparkFiles

        digest = hashlib.sha256(run_key.encode()).hexdigest()[:16]
        self.runs = Path(SparkFiles.getRootDirectory()) / "cloudburst-ceiling"
        self.path = self.runs / digest / f"rank-{rank}.npz"

    def forget_other_runs(self) -> None:
        for other in self.runs.glob("*"):
            if other != self.path.parent:
                shutil.rmtree(other, ignore_errors=True)

    def load(self, trained_round: int) -> list[np.ndarray] | None:
        """The weights left after ``trained_round``, or None when this executor has none from that round."""
        try:
            with np.load(self.path) as saved:
                if int(saved["round"]) != trained_round:
                    return None
                return [saved[f"w{index}"] for index in range(int(saved["tensors"]))]
        except (OSError, KeyError, ValueError):
            return None

    def save(self, trained_round: int, weights: Sequence[np.ndarray]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.stem}-{os.getpid()}.npz")
        np.savez(partial, round=trained_round, tensors=len(weights),
                 **{f"w{index}": tensor for index, tensor in enumerate(weights)})
        os.replace(partial, self.path)  # a reader sees the previous round's file or this one, never half of one


# Spark reuses its Python workers: a worker's data and compiled model are kept between the rounds of one run.
# Keyed by the whole run specification, so a later run in the same process never inherits another run's model,
# learning rate or optimizer state.
_worker_state: dict[tuple[str, int], WorkerState] = {}


def _worker_round(partitions: Iterator[int], spec_mapping: dict[str, Any], shards_uri: str, weights: Any,
                  epoch: int, round_index: int, threads: int) -> Iterator[dict[str, Any]]:
    """Train one worker for one round from the broadcast weights (or, when none were sent, from its own); yields
    its weights (with communication off, worker 0's only) and what it saw."""
    import tensorflow as tf

    from training.config import RunSpec
    from training.strategies.input_pipeline import training_dataset

    spec = RunSpec.from_mapping(spec_mapping)
    for rank in partitions:
        key = (f"{spec.to_json()}|{shards_uri}", rank)
        if key not in _worker_state:
            configure_tensorflow_threads(threads)
            tf.get_logger().setLevel("ERROR")
            for stale in [other for other in _worker_state if other[0] != key[0]]:
                del _worker_state[stale]  # another run's model and data: free them
            workload = spec.trainable()
            images, labels = workload.load_shard(shards_uri, rank, spec.total_workers)
            tf.keras.utils.set_random_seed(spec.seed)  # the driver's initial weights, for a worker sent none
            model = workload.build_model()
            model.compile(optimizer=make_optimizer(spec.worker_optimizer, spec.learning_rate),
                          loss=workload.make_loss(), metrics=["accuracy"])
            _worker_state[key] = WorkerState(workload, images, labels, model)
            if not spec.communication:
                RankWeightsFile(key[0], rank).forget_other_runs()
        state = _worker_state[key]
        workload, images, labels, model = state.workload, state.images, state.labels, state.model
        this_round = epoch * spec.rounds_per_epoch + round_index
        continued = state.last_round == this_round - 1  # this model trained the rank's previous round
        sent = None if weights is None else weights.value
        weights_file = None if spec.communication else RankWeightsFile(key[0], rank)
        if weights_file is not None and not continued and sent is None:
            left = weights_file.load(this_round - 1)
            if left is not None:
                model.set_weights(left)
                continued = True
        state.last_round = this_round
        # This round's part of the shard, from an order reshuffled every epoch.
        order = np.random.default_rng([spec.seed, rank, epoch]).permutation(len(labels))
        part = np.array_split(order, spec.rounds_per_epoch)[round_index]
        steps = len(part) // spec.batch_size_per_worker
        if steps < 1:
            raise ValueError(f"worker {rank}: a round's part of its shard ({len(part)} examples) is smaller than one "
                             f"batch of {spec.batch_size_per_worker}; lower rounds_per_epoch "
                             f"({spec.rounds_per_epoch}) or batch_size_per_worker")
        if sent is not None:
            model.set_weights(sent)
        workload.start_epoch(epoch)
        # Dropout draws and the shuffle follow the round, not whatever this Python worker ran before.
        tf.keras.utils.set_random_seed(_round_seed(spec.seed, rank, epoch, round_index))
        started = time.perf_counter()
        # Online augmentation: batch numbers run on over rounds and epochs (a round has at most ROUND_BATCHES).
        dataset = training_dataset(images[part], labels[part], spec.batch_size_per_worker,
                                   seed=spec.seed + rank + epoch, augment=workload.augment_batch,
                                   augment_seed=(spec.seed, rank),
                                   first_batch=(epoch * spec.rounds_per_epoch + round_index) * ROUND_BATCHES)
        history = model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
        if weights_file is not None:
            weights_file.save(this_round, model.get_weights())
        returned = spec.communication or rank == 0  # the ceiling: only the evaluated model comes back
        yield {"rank": rank, "weights": model.get_weights() if returned else None,
               "examples": steps * spec.batch_size_per_worker, "loss": float(history.history["loss"][-1]),
               "accuracy": float(history.history["accuracy"][-1]), "seconds": time.perf_counter() - started,
               "continued": continued}


def _round_seed(seed: int, rank: int, epoch: int, round_index: int) -> int:
    return int(np.random.SeedSequence([seed, rank, epoch, round_index]).generate_state(1)[0])


def train_in_rounds(spec: RunSpec, evaluation: EvaluationSet, run_uri: str, run_round: RoundRunner,
                    threads: int) -> TrainingResult:
    """The driver's loop: rounds of ``run_round`` (Spark tasks, in production) and averaging, evaluated on the
    schedule, checkpointed after every epoch."""
    import tensorflow as tf

    from training.models.model_files import save_run_model
    from training.strategies.checkpoints import CheckpointStore
    from training.strategies.evaluation_clock import correct_predictions

    started = time.perf_counter()
    workload = spec.trainable()
    tf.keras.utils.set_random_seed(spec.seed)  # the initial weights every worker starts from
    model = workload.build_model()
    test_images, test_labels = evaluation.load(workload)
    checkpoints = CheckpointStore(run_uri)
    checkpoint = tf.train.Checkpoint(model=model)
    resumed_from = checkpoints.latest_epoch()
    history = {"epochs": [], "evaluations": [], "training_seconds": 0.0, "bytes_moved": 0, "evaluation_bytes": 0,
               "worker_rounds_not_continued": 0}
    if resumed_from:
        history = {**history, **checkpoints.restore(resumed_from, checkpoint)}
        log.info("resuming after epoch %d from %s", resumed_from, checkpoints.where.uri)
    weights = model.get_weights()
    weight_bytes = sum(tensor.nbytes for tensor in weights)
    evaluated_rounds = set(bookkeeping.evaluation_schedule(spec.rounds_per_epoch, spec.evaluations_per_epoch))
    clock = history["training_seconds"]
    first_round = True
    for epoch in range(resumed_from, spec.epochs):
        epoch_seconds, examples = 0.0, 0
        losses, accuracies, counts_seen = [], [], []
        for round_index in range(spec.rounds_per_epoch):
            round_started = time.perf_counter()
            # The ceiling sends weights only to restore a resumed run; its workers start from the seeded weights.
            sent = weights if spec.communication or (first_round and resumed_from) else None
            results = run_round(sent, epoch, round_index)
            counts = [result["examples"] for result in results]
            if spec.communication:
                weights = weighted_average([result["weights"] for result in results], counts)
            else:
                weights = next(result["weights"] for result in results if result["rank"] == 0)
            seconds = time.perf_counter() - round_started
            epoch_seconds += seconds
            clock += seconds
            examples += sum(counts)
            losses += [result["loss"] for result in results]
            accuracies += [result["accuracy"] for result in results]
            counts_seen += counts
            if spec.communication:
                history["bytes_moved"] += 2 * weight_bytes * spec.total_workers  # broadcast down, results up
            else:
                history["bytes_moved"] += 0 if sent is None else weight_bytes * spec.total_workers
                history["evaluation_bytes"] += weight_bytes
                if not first_round:  # a job's first round continues no earlier one in any mode
                    history["worker_rounds_not_continued"] += sum(not result["continued"] for result in results)
            first_round = False
            model.set_weights(weights)
            if round_index + 1 in evaluated_rounds:
                accuracy = correct_predictions(model, test_images, test_labels) / len(test_labels)
                history["evaluations"].append(
                    bookkeeping.evaluation(clock, epoch + (round_index + 1) / spec.rounds_per_epoch, accuracy))
        row = bookkeeping.epoch_row(epoch + 1, bookkeeping.weighted_mean(losses, counts_seen),
                                    bookkeeping.weighted_mean(accuracies, counts_seen),
                                    history["evaluations"][-1]["val_accuracy"], epoch_seconds, examples)
        row.update(workload.measure_epoch(model))  # the averaged model, off the clock
        history["epochs"].append(row)
        history["training_seconds"] = clock
        log.info("[averaging] %s", bookkeeping.describe_epoch(row, spec.epochs))
        checkpoints.save(epoch + 1, checkpoint, history)
    extra = {"threads_per_worker": threads, "rounds_per_epoch": spec.rounds_per_epoch,
             "communication": spec.communication}
    metrics = {"bytes_moved": history["bytes_moved"]}
    if not spec.communication:
        extra["worker_rounds_not_continued"] = history["worker_rounds_not_continued"]
        metrics["evaluation_bytes"] = history["evaluation_bytes"]
    return TrainingResult(
        epochs=history["epochs"], evaluations=history["evaluations"],
        wall_seconds=time.perf_counter() - started, training_seconds=history["training_seconds"],
        time_to_target_seconds=bookkeeping.time_to_target(history["evaluations"], spec.target_accuracy),
        model_uri=save_run_model(run_uri, model), total_workers=spec.total_workers, resumed_from_epoch=resumed_from,
        extra=extra, metrics=metrics,
    )


class AveragingStrategy:
    """Synchronous rounds of local training + example-weighted averaging, on plain Spark tasks."""

    name = "averaging"

    def train(self, spec: RunSpec, shards_uri: str, evaluation: EvaluationSet, run_uri: str,
              spark: SparkSession) -> TrainingResult:
        threads = threads_per_worker(spec, cores_per_node(spark, spec))
        context = spark.sparkContext

        def spark_round(weights: list[np.ndarray] | None, epoch: int, round_index: int) -> list[dict[str, Any]]:
            broadcast = None if weights is None else context.broadcast(weights)
            task = functools.partial(_worker_round, spec_mapping=spec.to_mapping(), shards_uri=shards_uri,
                                     weights=broadcast, epoch=epoch, round_index=round_index, threads=threads)
            try:
                return context.parallelize(range(spec.total_workers), spec.total_workers).mapPartitions(task) \
                    .collect()
            finally:
                if broadcast is not None:
                    broadcast.unpersist()

        return train_in_rounds(spec, evaluation, run_uri, spark_round, threads)
