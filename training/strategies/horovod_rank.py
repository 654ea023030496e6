"""What a Horovod rank (``horovod.train_rank``) trains with besides its model: its communication, chosen once at
its start, its checkpoints and its per-epoch record. Imported only inside the ranks (it loads TensorFlow and
Horovod). Lines that exist only for distribution say ``Horovod:``.

The communication is the ring (``RingAllReduce``: Horovod's collectives over Gloo) or, with ``communication`` off
(the ceiling), ``RanksApart``: the same calls, answered by each rank alone and sending nothing.
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

import horovod.tensorflow as hvd_ops  # collective operations on tensors
import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

from training import sharding, storage
from training.models.model_files import save_run_model
from training.models.optimizers import make_optimizer
from training.strategies import bookkeeping
from training.strategies.checkpoints import CheckpointStore
from training.strategies.evaluation_clock import EvaluationClock
from training.strategies.weight_average import WeightAverage

if TYPE_CHECKING:
    from training.config import RunSpec


class RingAllReduce:
    """Horovod's collectives: gradients averaged over the ring, rank 0's state broadcast, metrics, evaluation counts
    and normalization statistics combined over the ranks."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.ranks_in_epoch_row = size  # the ranks step together: an epoch's samples are all of theirs

    def shortest_shard(self, own_examples: int, shards_uri: str) -> int:
        return int(hvd_ops.allreduce(np.array(own_examples), op=hvd_ops.Min, name="shortest_shard"))

    def learning_rate(self, spec: RunSpec) -> float:
        return spec.learning_rate * self.size  # Horovod: scale the learning rate by the workers

    def optimizer(self, spec: RunSpec) -> Any:
        return hvd.DistributedOptimizer(  # Horovod: average gradients with ring all-reduce
            make_optimizer(spec.worker_optimizer, self.learning_rate(spec)),
            compression=hvd.Compression.fp16 if spec.fp16_compression else hvd.Compression.none,
            backward_passes_per_step=spec.backward_passes_per_step,
            average_aggregated_gradients=True,
        )

    def latest_epoch(self, checkpoints: CheckpointStore) -> int:
        """Rank 0 reads the checkpoints; Horovod tells the other ranks."""
        return hvd_ops.broadcast_object(checkpoints.latest_epoch() if self.rank == 0 else None, root_rank=0)

    def sum_over_ranks(self, counts: np.ndarray) -> np.ndarray:
        return hvd_ops.allreduce(counts, op=hvd_ops.Sum, name="evaluation_counts").numpy()  # Horovod: sum slices

    def callbacks(self, spec: RunSpec, resumed_from: int, steps_per_epoch: int) -> list[tf.keras.callbacks.Callback]:
        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # Horovod: start every rank from rank 0's state
            hvd.callbacks.MetricAverageCallback(),  # Horovod: report metrics averaged over ranks
        ]
        if spec.warmup_epochs > resumed_from:
            callbacks.append(hvd.callbacks.LearningRateWarmupCallback(  # Horovod: ramp up to the scaled rate
                initial_lr=self.learning_rate(spec), warmup_epochs=spec.warmup_epochs,
                steps_per_epoch=steps_per_epoch, verbose=0))
        if spec.learning_rate_decay == "cosine" and spec.epochs > spec.warmup_epochs:
            callbacks.append(hvd.callbacks.LearningRateScheduleCallback(  # then down to 0 along a half cosine
                initial_lr=self.learning_rate(spec), multiplier=cosine_decay(spec.warmup_epochs, spec.epochs),
                start_epoch=spec.warmup_epochs, end_epoch=spec.epochs, staircase=False,
                steps_per_epoch=steps_per_epoch))
        return callbacks

    def average_statistics(self, model: tf.keras.Model) -> None:
        """Horovod: each rank's normalization statistics saw only its own shard; every rank keeps their average."""
        for index, variable in enumerate(model.non_trainable_weights):
            variable.assign(hvd_ops.allreduce(variable, op=hvd_ops.Average, name=f"statistics_{index}"))

    def payload_bytes(self, model: tf.keras.Model, spec: RunSpec) -> int:
        return gradient_bytes(model, spec.fp16_compression)

    def own_measures(self, history: dict[str, Any]) -> dict[str, Any]:
        return {}  # rank 0's measures speak for every rank


class RanksApart:
    """The ceiling's stand-in for the ring: every rank answers alone from shared storage, steps with a plain
    optimizer at the one-worker rate, reports only its own metrics, and nothing is sent."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.ranks_in_epoch_row = 1  # the ranks run on their own clocks: the driver adds their rates

    def shortest_shard(self, own_examples: int, shards_uri: str) -> int:
        return min(worker_rows(shards_uri, self.size))  # the ring's answer, read from the manifest

    def optimizer(self, spec: RunSpec) -> Any:
        # A lone rank's gradient is one batch's, not the average of size batches: the one-worker rate.
        return make_optimizer(spec.worker_optimizer, spec.learning_rate)

    def latest_epoch(self, checkpoints: CheckpointStore) -> int:
        return checkpoints.latest_epoch()  # every rank reads rank 0's checkpoints itself

    def sum_over_ranks(self, counts: np.ndarray) -> np.ndarray:
        return counts  # each rank's own model on its own slice

    def callbacks(self, spec: RunSpec, resumed_from: int, steps_per_epoch: int) -> list[tf.keras.callbacks.Callback]:
        return []  # every rank starts from the same seeded weights anyway; no warm-up or decay of a scaled rate

    def average_statistics(self, model: tf.keras.Model) -> None:
        pass  # each rank keeps its own model

    def payload_bytes(self, model: tf.keras.Model, spec: RunSpec) -> int:
        return 0

    def own_measures(self, history: dict[str, Any]) -> dict[str, Any]:
        """Every rank's epochs and clock: the driver adds the ranks' rates."""
        return {"epochs": history["epochs"], "training_seconds": history["training_seconds"]}


def rank_communication(spec: RunSpec) -> RingAllReduce | RanksApart:
    """Start Horovod (the ceiling's ranks start through horovod.spark too) and choose how this rank communicates."""
    hvd.init()  # Horovod: one rank per worker
    return (RingAllReduce if spec.communication else RanksApart)(hvd.rank(), hvd.size())


class RankCheckpoints:
    """The run's checkpoints as a rank sees them: model, optimizer and weight average, with the history so far
    (epoch rows, evaluations, training clock). Every rank restores the newest; rank 0 writes them."""

    def __init__(self, run_uri: str, model: tf.keras.Model, optimizer: Any,
                 weight_average: WeightAverage | None) -> None:
        self.run_uri = run_uri
        self.store = CheckpointStore(run_uri)
        self.state = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                         **({"weight_average": weight_average.state()} if weight_average else {}))
        self.resumed_from = 0
        self.previous: dict[str, Any] = {"epochs": [], "evaluations": [], "training_seconds": 0.0}

    def restore_newest(self, communication: RingAllReduce | RanksApart) -> int:
        """Load the newest checkpoint, if there is one; returns the epochs it completed (0: none)."""
        self.resumed_from = communication.latest_epoch(self.store)
        if self.resumed_from:
            self.previous = self.store.restore(self.resumed_from, self.state)
            if communication.rank == 0:
                print(f"[horovod] resuming after epoch {self.resumed_from} from {self.run_uri}/checkpoints",
                      flush=True)
        return self.resumed_from

    def save(self, epoch: int, history: dict[str, Any]) -> None:
        self.store.save(epoch, self.state, history)


class EpochRecorder(tf.keras.callbacks.Callback):
    """The shared per-epoch metrics on every rank (after MetricAverage ran); rank 0 adds the workload's epoch
    measures, prints the progress line and checkpoints."""

    def __init__(self, spec: RunSpec, workload: Any, rank: int, samples_per_epoch: int, clock: EvaluationClock,
                 checkpoints: RankCheckpoints) -> None:
        super().__init__()
        self.spec, self.workload, self.rank, self.samples_per_epoch = spec, workload, rank, samples_per_epoch
        self.clock, self.checkpoints = clock, checkpoints
        self.epochs: list[dict[str, Any]] = list(checkpoints.previous["epochs"])

    def history(self) -> dict[str, Any]:
        """The run so far, earlier attempts included: what a checkpoint keeps and rank 0 reports."""
        return {"epochs": self.epochs,
                "evaluations": self.checkpoints.previous["evaluations"] + self.clock.evaluations,
                "training_seconds": self.clock.training_seconds()}

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.workload.start_epoch(epoch)  # e.g. the speaker models' margin ramp

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        row = bookkeeping.epoch_row(epoch + 1, logs["loss"], logs["accuracy"], logs["val_accuracy"],
                                    logs["epoch_seconds"], samples=self.samples_per_epoch)
        if "val_accuracy_trained_weights" in logs:
            row["val_accuracy_trained_weights"] = float(logs["val_accuracy_trained_weights"])
        self.epochs.append(row)
        if self.rank == 0:
            measuring_started = time.perf_counter()
            with self.clock.weights_to_evaluate():
                row.update(self.workload.measure_epoch(self.model))
            self.clock.evaluation_seconds += time.perf_counter() - measuring_started  # off the training clock
            print(f"[horovod] {bookkeeping.describe_epoch(row, self.spec.epochs)}", flush=True)
            self.checkpoints.save(epoch + 1, self.history())


def rank_result(spec: RunSpec, communication: RingAllReduce | RanksApart, model: tf.keras.Model,
                recorder: EpochRecorder, steps_per_epoch: int, threads: int) -> dict[str, Any]:
    """What a rank returns to the driver: its weights' digest; rank 0 also what it measured and the saved model."""
    weights_sha256 = weights_digest(model)
    if communication.rank != 0:
        return {"rank": communication.rank, "weights_sha256": weights_sha256,
                **communication.own_measures(recorder.history())}
    history = recorder.history()
    checkpoints = recorder.checkpoints
    return {
        "rank": 0,
        "weights_sha256": weights_sha256,
        **history,  # epochs, evaluations, training_seconds
        "time_to_target_seconds": bookkeeping.time_to_target(history["evaluations"], spec.target_accuracy),
        "model_uri": save_run_model(checkpoints.run_uri, model),
        "resumed_from_epoch": checkpoints.resumed_from,
        "threads_per_worker": threads,
        "steps_per_epoch": steps_per_epoch,
        "network_interface": os.environ.get("HOROVOD_GLOO_IFACE", ""),  # the one Horovod's launcher gave Gloo
        # What the ring carried over the whole run (earlier attempts included, as Downpour counts): one all-reduce
        # of the gradients per backward_passes_per_step steps.
        "bytes_moved": ring_allreduce_bytes(communication.size, communication.payload_bytes(model, spec),
                                            spec.epochs * steps_per_epoch // spec.backward_passes_per_step),
    }


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


def cosine_decay(start_epoch: int, end_epoch: int) -> Any:
    """The multiplier of the learning rate at a (fractional) epoch: 1 at ``start_epoch``, a half cosine down to 0
    at ``end_epoch``."""

    def multiplier(epoch: float) -> float:
        progress = min(max((epoch - start_epoch) / (end_epoch - start_epoch), 0.0), 1.0)
        return 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def weights_digest(model: Any) -> str:
    """A fingerprint of the final weights: synchronous training must end with the same one on every rank."""
    import hashlib

    digest = hashlib.sha256()
    for weights in model.get_weights():
        digest.update(weights.tobytes())
    return digest.hexdigest()
