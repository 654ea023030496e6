"""Synchronous data parallelism: Horovod ring all-reduce over Gloo, launched as Spark tasks (horovod.spark.run).

Each of nodes × workers_per_node ranks reads only its own shard, trains a plain Keras model whose optimizer is
wrapped by ``hvd.DistributedOptimizer``, and evaluates its slice of the evaluation set; rank 0 checkpoints after
every epoch so a retried job resumes where it stopped. A model's non-trainable state (batch normalization's
moving statistics, each rank's from its own shard) is averaged over the ranks when training ends, so every rank
ends with the same model. Lines that exist only for distribution say ``Horovod:``.

With ``communication`` off (the ceiling) the ranks still start through horovod.spark, read the same shards and
take the same steps, but skip every ``Horovod:`` collective: plain optimizer at the one-worker learning rate, no
broadcast, no averaged metrics; each rank evaluates its own model on its slice, and the driver adds the ranks'
throughputs (they no longer wait for each other).
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from typing import TYPE_CHECKING, Any

from training import sharding, storage
from training.models.optimizers import make_optimizer
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
               node_cores: int) -> dict[str, Any] | None:
    """The function every Horovod rank runs; rank 0 returns what it measured, the others their weights' digest."""
    import horovod.tensorflow as hvd_ops  # collective operations on tensors
    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    from training.config import RunSpec
    from training.models.model_files import save_run_model
    from training.strategies.checkpoints import CheckpointStore
    from training.strategies.evaluation_clock import EvaluationClock
    from training.strategies.weight_average import WeightAverage
    from training.workloads import workload_for

    spec = RunSpec.from_mapping(spec_mapping)
    tf.get_logger().setLevel("ERROR")  # per-step evaluation trips Keras' "slow callback" warning by design
    hvd.init()  # Horovod: one rank per worker
    rank, size = hvd.rank(), hvd.size()
    configure_tensorflow_threads(threads_per_worker(spec, node_cores))
    tf.keras.utils.set_random_seed(spec.seed)

    workload = workload_for(spec)
    images, labels = workload.load_shard(shards_uri, rank, size)  # Horovod: each rank reads only its own shard
    test_images, test_labels = evaluation.load(workload)
    test_images, test_labels = test_images[rank::size], test_labels[rank::size]  # Horovod: evaluate a slice

    # Horovod: every rank must take the same number of steps, and a multiple of the accumulation window.
    if spec.communication:
        shortest_shard = int(hvd_ops.allreduce(np.array(len(labels)), op=hvd_ops.Min, name="shortest_shard"))
    else:  # the same steps as with communication, read from the manifest instead of asked of the other ranks
        shortest_shard = min(worker_rows(shards_uri, size))
    steps_per_epoch = shortest_shard // spec.batch_size_per_worker
    steps_per_epoch -= steps_per_epoch % spec.backward_passes_per_step
    if steps_per_epoch < 1:
        raise ValueError(f"shard of {shortest_shard} examples is smaller than one batch of "
                         f"{spec.batch_size_per_worker} × backward_passes_per_step {spec.backward_passes_per_step}")

    model = workload.build_model()
    if spec.communication:
        scaled_learning_rate = spec.learning_rate * size  # Horovod: scale the learning rate by the workers
        optimizer = hvd.DistributedOptimizer(  # Horovod: average gradients with ring all-reduce
            make_optimizer(spec.worker_optimizer, scaled_learning_rate),
            compression=hvd.Compression.fp16 if spec.fp16_compression else hvd.Compression.none,
            backward_passes_per_step=spec.backward_passes_per_step,
            average_aggregated_gradients=True,
        )
    else:  # a lone rank's gradient is one batch's, not the average of size batches: the one-worker rate
        optimizer = make_optimizer(spec.worker_optimizer, spec.learning_rate)
    model.compile(optimizer=optimizer, loss=workload.make_loss(), metrics=["accuracy"])

    # Built before the checkpoint so a resumed run restores the average with the weights.
    weight_average = WeightAverage(model, spec.weight_average_decay) if spec.weight_average_decay else None
    checkpoints = CheckpointStore(run_uri)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     **({"weight_average": weight_average.state()} if weight_average else {}))
    if spec.communication:
        resumed_from = hvd_ops.broadcast_object(checkpoints.latest_epoch() if rank == 0 else None, root_rank=0)
    else:  # every rank reads rank 0's checkpoints itself (shared storage); nothing is sent
        resumed_from = checkpoints.latest_epoch()
    previous: dict[str, Any] = {"epochs": [], "evaluations": [], "training_seconds": 0.0}
    if resumed_from:
        previous = checkpoints.restore(resumed_from, checkpoint)
        if rank == 0:
            print(f"[horovod] resuming after epoch {resumed_from} from {run_uri}/checkpoints", flush=True)

    def evaluation_counts(counts: np.ndarray) -> np.ndarray:
        if not spec.communication:
            return counts  # the ceiling: each rank's own model on its own slice
        return hvd_ops.allreduce(counts, op=hvd_ops.Sum, name="evaluation_counts").numpy()  # Horovod: sum slices

    dataset = training_dataset(images, labels, spec.batch_size_per_worker, seed=spec.seed + rank,
                               augment=workload.augment_batch, augment_seed=(spec.seed, rank),
                               first_batch=resumed_from * steps_per_epoch)
    clock = EvaluationClock(
        test_images, test_labels,
        evaluations_per_epoch=spec.evaluations_per_epoch,
        steps_per_epoch=steps_per_epoch,
        target_accuracy=spec.target_accuracy,
        combine=evaluation_counts,
        clock_offset_seconds=previous["training_seconds"],
        evaluated_weights=weight_average.swapped_in if weight_average else None,
    )
    epochs: list[dict[str, float]] = list(previous["epochs"])

    class EpochRecorder(tf.keras.callbacks.Callback):
        """Collects the shared per-epoch metrics and checkpoints on rank 0 (after MetricAverage ran)."""

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            workload.start_epoch(epoch)  # e.g. the speaker models' margin ramp

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            logs = logs or {}
            ranks_counted = size if spec.communication else 1  # the ceiling: this rank's own samples
            row = bookkeeping.epoch_row(epoch + 1, logs["loss"], logs["accuracy"], logs["val_accuracy"],
                                        logs["epoch_seconds"],
                                        samples=steps_per_epoch * spec.batch_size_per_worker * ranks_counted)
            if "val_accuracy_trained_weights" in logs:
                row["val_accuracy_trained_weights"] = float(logs["val_accuracy_trained_weights"])
            epochs.append(row)
            if rank == 0:
                measuring_started = time.perf_counter()
                with clock.weights_to_evaluate():
                    row.update(workload.measure_epoch(self.model))
                clock.evaluation_seconds += time.perf_counter() - measuring_started  # off the training clock
                print(f"[horovod] {bookkeeping.describe_epoch(row, spec.epochs)}", flush=True)
                checkpoints.save(epoch + 1, checkpoint, {
                    "epochs": epochs,
                    "evaluations": previous["evaluations"] + clock.evaluations,
                    "training_seconds": clock.training_seconds(),
                })

    # The ceiling skips these: every rank starts from the same seeded weights anyway and reports its own metrics.
    callbacks: list[tf.keras.callbacks.Callback] = []
    if spec.communication:
        callbacks += [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # Horovod: start every rank from rank 0's state
            hvd.callbacks.MetricAverageCallback(),  # Horovod: report metrics averaged over ranks
        ]
        if spec.warmup_epochs > resumed_from:
            callbacks.append(hvd.callbacks.LearningRateWarmupCallback(  # Horovod: ramp up to the scaled rate
                initial_lr=scaled_learning_rate, warmup_epochs=spec.warmup_epochs, steps_per_epoch=steps_per_epoch,
                verbose=0))
        if spec.learning_rate_decay == "cosine" and spec.epochs > spec.warmup_epochs:
            callbacks.append(hvd.callbacks.LearningRateScheduleCallback(  # then down to 0 along a half cosine
                initial_lr=scaled_learning_rate, multiplier=cosine_decay(spec.warmup_epochs, spec.epochs),
                start_epoch=spec.warmup_epochs, end_epoch=spec.epochs, staircase=False,
                steps_per_epoch=steps_per_epoch))
    # After Horovod's broadcast (the average starts from rank 0's weights), before the evaluations that use it.
    callbacks += [*([weight_average] if weight_average else []), clock, EpochRecorder()]
    model.fit(dataset, epochs=spec.epochs, initial_epoch=resumed_from, steps_per_epoch=steps_per_epoch,
              callbacks=callbacks, verbose=0)

    if weight_average:
        weight_average.install()  # the result is the average: its digest, its saved model
    if spec.communication:  # Horovod: each rank's normalization statistics saw its own shard; keep their average
        for index, variable in enumerate(model.non_trainable_weights):
            variable.assign(hvd_ops.allreduce(variable, op=hvd_ops.Average, name=f"statistics_{index}"))
    weights_sha256 = _weights_digest(model)
    if rank != 0:
        if spec.communication:
            return {"rank": rank, "weights_sha256": weights_sha256}
        # The ceiling: the ranks ran on their own clocks, so the driver needs each one's epochs to add their rates.
        return {"rank": rank, "weights_sha256": weights_sha256, "epochs": epochs,
                "training_seconds": clock.training_seconds()}
    evaluations = previous["evaluations"] + clock.evaluations
    return {
        "rank": 0,
        "weights_sha256": weights_sha256,
        "epochs": epochs,
        "evaluations": evaluations,
        "training_seconds": clock.training_seconds(),
        "time_to_target_seconds": bookkeeping.time_to_target(evaluations, spec.target_accuracy),
        "model_uri": save_run_model(run_uri, model),
        "resumed_from_epoch": resumed_from,
        "threads_per_worker": threads_per_worker(spec, node_cores),
        "steps_per_epoch": steps_per_epoch,
        "network_interface": os.environ.get("HOROVOD_GLOO_IFACE", ""),  # the one Horovod's launcher gave Gloo
        # What the ring carried over the whole run (earlier attempts included, as Downpour counts): one all-reduce
        # of the gradients per backward_passes_per_step steps.
        "bytes_moved": ring_allreduce_bytes(
            size, gradient_bytes(model, spec.fp16_compression) if spec.communication else 0,
            spec.epochs * steps_per_epoch // spec.backward_passes_per_step),
    }


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


def gradient_bytes(model: Any, fp16_compression: bool) -> int:
    """Bytes of one all-reduce's payload: every trainable weight's gradient, float32 or float16 compressed."""
    import numpy as np

    elements = sum(int(np.prod(variable.shape)) for variable in model.trainable_variables)
    return elements * (2 if fp16_compression else 4)


def ring_allreduce_bytes(workers: int, payload_bytes: int, allreduces: int) -> int:
    """Bytes all ranks send together in ``allreduces`` ring all-reduces of ``payload_bytes``: each rank sends
    2(N−1)/N of the payload per all-reduce (reduce-scatter, then all-gather), so N ranks send 2(N−1) payloads, each
    byte sent once and received once. One rank sends nothing."""
    return 2 * (workers - 1) * payload_bytes * allreduces


def worker_rows(shards_uri: str, workers: int) -> list[int]:
    """Each worker's training examples, from the shards manifest (a worker may hold several shards)."""
    rows = [shard["rows"] for shard in storage.require_manifest(shards_uri, sharding.DATASET_KIND)["shards"]]
    return [sum(rows[shard] for shard in sharding.shards_of_worker(rank, workers, len(rows)))
            for rank in range(workers)]


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


def cosine_decay(start_epoch: int, end_epoch: int) -> Any:
    """The multiplier of the learning rate at a (fractional) epoch: 1 at ``start_epoch``, a half cosine down to 0
    at ``end_epoch``."""

    def multiplier(epoch: float) -> float:
        progress = min(max((epoch - start_epoch) / (end_epoch - start_epoch), 0.0), 1.0)
        return 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def _weights_digest(model: Any) -> str:
    """A fingerprint of the final weights: synchronous training must end with the same one on every rank."""
    import hashlib

    digest = hashlib.sha256()
    for weights in model.get_weights():
        digest.update(weights.tobytes())
    return digest.hexdigest()
