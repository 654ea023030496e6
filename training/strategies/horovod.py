"""Synchronous data parallelism: Horovod ring all-reduce over Gloo, launched as Spark tasks (horovod.spark.run).

Each of nodes × workers_per_node ranks reads only its own shard, trains a plain Keras model whose optimizer is
wrapped by ``hvd.DistributedOptimizer``, and evaluates its slice of the evaluation set; rank 0 checkpoints after
every epoch so a retried job resumes where it stopped. A model's non-trainable state (batch normalization's
moving statistics, each rank's from its own shard) is averaged over the ranks when training ends, so every rank
ends with the same model. Lines that exist only for distribution say ``Horovod:``.

With ``communication`` off (the ceiling) the ranks still start through horovod.spark, read the same shards and
take the same steps, but skip every ``Horovod:`` collective: plain optimizer at the one-worker learning rate, no
broadcast, no averaged metrics; each rank evaluates its own model on its slice, and the driver adds the ranks'
throughputs (they no longer wait for each other). A rank chooses this once, at its start: its communication is
``horovod_rank.RingAllReduce`` or ``horovod_rank.RanksApart``, whose methods ``train_rank`` calls either way.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

from training.strategies import bookkeeping
from training.strategies.base import EvaluationSet, TrainingInterruptedError, TrainingResult
from training.strategies.input_pipeline import training_dataset
from training.strategies.placement import (
    configure_tensorflow_threads,
    cores_per_node,
    horovod_interfaces,
    threads_per_worker,
    worker_environment,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

def train_rank(spec_mapping: dict[str, Any], shards_uri: str, evaluation: EvaluationSet, run_uri: str,
               node_cores: int) -> dict[str, Any]:
    """The function every Horovod rank runs; rank 0 returns what it measured, the others their weights' digest."""
    import tensorflow as tf

    from training.config import RunSpec
    from training.strategies.evaluation_clock import EvaluationClock
    from training.strategies.horovod_rank import EpochRecorder, RankCheckpoints, rank_communication, rank_result
    from training.strategies.weight_average import WeightAverage

    spec = RunSpec.from_mapping(spec_mapping)
    tf.get_logger().setLevel("ERROR")  # per-step evaluation trips Keras' "slow callback" warning by design
    communication = rank_communication(spec)  # Horovod: the ring; the ceiling: ranks apart, sending nothing
    rank, size = communication.rank, communication.size
    configure_tensorflow_threads(threads_per_worker(spec, node_cores))
    tf.keras.utils.set_random_seed(spec.seed)

    workload = spec.trainable()
    images, labels = workload.load_shard(shards_uri, rank, size)  # Horovod: each rank reads only its own shard
    test_images, test_labels = evaluation.load(workload)
    test_images, test_labels = test_images[rank::size], test_labels[rank::size]  # Horovod: evaluate a slice
    steps_per_epoch = common_steps_per_epoch(communication.shortest_shard(len(labels), shards_uri), spec)

    model = workload.build_model()
    optimizer = communication.optimizer(spec)
    model.compile(optimizer=optimizer, loss=workload.make_loss(), metrics=["accuracy"])
    # Built before the checkpoint so a resumed run restores the average with the weights.
    weight_average = WeightAverage(model, spec.weight_average_decay) if spec.weight_average_decay else None
    checkpoints = RankCheckpoints(run_uri, model, optimizer, weight_average)
    resumed_from = checkpoints.restore_newest(communication)

    dataset = training_dataset(images, labels, spec.batch_size_per_worker, seed=spec.seed + rank,
                               augment=workload.augment_batch, augment_seed=(spec.seed, rank),
                               first_batch=resumed_from * steps_per_epoch)
    clock = EvaluationClock(test_images, test_labels, evaluations_per_epoch=spec.evaluations_per_epoch,
                            steps_per_epoch=steps_per_epoch, target_accuracy=spec.target_accuracy,
                            combine=communication.sum_over_ranks,
                            clock_offset_seconds=checkpoints.previous["training_seconds"],
                            evaluated_weights=weight_average.swapped_in if weight_average else None)
    recorder = EpochRecorder(spec, workload, rank, clock=clock, checkpoints=checkpoints, samples_per_epoch=(
        steps_per_epoch * spec.batch_size_per_worker * communication.ranks_in_epoch_row))
    # The average after Horovod's broadcast (it starts from rank 0's weights), before the evaluations that use it.
    model.fit(dataset, epochs=spec.epochs, initial_epoch=resumed_from, steps_per_epoch=steps_per_epoch, verbose=0,
              callbacks=[*communication.callbacks(spec, resumed_from, steps_per_epoch),
                         *([weight_average] if weight_average else []), clock, recorder])

    if weight_average:
        weight_average.install()  # the result is the average: its digest, its saved model
    communication.average_statistics(model)  # Horovod: normalization statistics from every rank's shard
    return rank_result(spec, communication, model, recorder, steps_per_epoch, threads_per_worker(spec, node_cores))


class HorovodStrategy:
    """``horovod.spark.run`` with num_proc = nodes × workers_per_node, over Gloo."""

    name = "horovod"

    def train(self, spec: RunSpec, shards_uri: str, evaluation: EvaluationSet, run_uri: str,
              spark: SparkSession) -> TrainingResult:
        import horovod.spark

        from training.strategies.signal_handlers import restored_signal_handlers

        node_cores = cores_per_node(spark, spec)
        started = time.perf_counter()
        with restored_signal_handlers():  # Horovod's Gloo launcher replaces SIGINT/SIGTERM for good
            try:
                results = horovod.spark.run(
                    train_rank,
                    args=(spec.to_mapping(), shards_uri, evaluation, run_uri, node_cores),
                    num_proc=spec.total_workers,
                    use_gloo=True,
                    env=worker_environment(),
                    verbose=1,
                    nics=horovod_interfaces(spark.sparkContext.master),
                    # The executors' Python (spark.pyspark.python, e.g. a shipped ./env/bin/python), not Horovod's
                    # default, the driver's sys.executable: a path on the edge node that other hosts need not have.
                    executable=spark.sparkContext.pythonExec,
                )
            except RuntimeError as error:
                if "processes exited with non-zero" not in str(error):
                    raise
                # A rank died (its host lost, killed, out of memory): the ring cannot go on without it.
                from training.strategies.checkpoints import CheckpointStore

                saved = CheckpointStore(run_uri).latest_epoch()
                found = re.search(r"Process name: (\S+)\s+Exit code: (\S+)", str(error))
                which = f"rank {found.group(1)}, exit code {found.group(2)}" if found else "see below"
                again = "resumes from there" if saved else "starts over"
                raise TrainingInterruptedError(
                    f"Horovod's job ended when a rank exited ({which}); its ranks' output is in the executors' "
                    f"logs. Checkpoints keep {saved} of {spec.epochs} epochs: running the step again {again}") from None
        wall_seconds = time.perf_counter() - started
        results = sorted(results, key=lambda result: result["rank"])
        measured = results[0]
        digests = [result["weights_sha256"] for result in results]
        epochs, training_seconds = measured["epochs"], measured["training_seconds"]
        if not spec.communication:
            epochs = independent_epochs([result["epochs"] for result in results])
            training_seconds = max(result["training_seconds"] for result in results)
        return TrainingResult(
            epochs=epochs,
            evaluations=measured["evaluations"],
            wall_seconds=wall_seconds,
            training_seconds=training_seconds,
            time_to_target_seconds=measured["time_to_target_seconds"],
            model_uri=measured["model_uri"],
            total_workers=spec.total_workers,
            resumed_from_epoch=measured["resumed_from_epoch"],
            extra={"threads_per_worker": measured["threads_per_worker"],
                   "steps_per_epoch": measured["steps_per_epoch"],
                   "network_interface": measured["network_interface"],
                   "weights_sha256_per_rank": digests,
                   "ranks_in_sync": len(set(digests)) == 1,
                   "communication": spec.communication},
            # The ring's bytes are computed from its algorithm, not counted on the wire (the namespace-cluster test
            # checks the links carry them); the ceiling's are 0.
            metrics={"bytes_moved": measured["bytes_moved"]},
        )




def common_steps_per_epoch(shortest_shard: int, spec: RunSpec) -> int:
    """Horovod: every rank must take the same number of steps, and a multiple of the accumulation window."""
    steps = shortest_shard // spec.batch_size_per_worker
    steps -= steps % spec.backward_passes_per_step
    if steps < 1:
        raise ValueError(f"shard of {shortest_shard} examples is smaller than one batch of "
                         f"{spec.batch_size_per_worker} × backward_passes_per_step {spec.backward_passes_per_step}")
    return steps



def independent_epochs(rows_per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ceiling's epoch rows: rank 0's (its val_accuracy and workload measures), with the ranks' throughputs
    added and their train loss and accuracy averaged (every rank took the same steps)."""
    combined = []
    for rows in zip(*rows_per_rank, strict=True):
        samples = [row["samples_per_second"] * row["epoch_seconds"] for row in rows]
        seconds = [row["epoch_seconds"] for row in rows]
        losses, accuracies = [row["train_loss"] for row in rows], [row["train_accuracy"] for row in rows]
        known = None not in losses and None not in accuracies  # an earlier attempt's epochs lack them
        combined.append({**rows[0], **bookkeeping.epoch_row(
            rows[0]["epoch"], bookkeeping.weighted_mean(losses, samples) if known else None,
            bookkeeping.weighted_mean(accuracies, samples) if known else None, rows[0]["val_accuracy"],
            bookkeeping.independent_epoch_seconds(samples, seconds), sum(samples))})
    return combined
