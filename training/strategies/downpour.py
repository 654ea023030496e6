"""Asynchronous Downpour SGD (Dean et al. 2012): a sharded parameter server in the Spark driver, and
nodes × workers_per_node workers as Spark tasks that fetch, train locally and push on their own clocks.

Each task runs its worker as a child process (training.strategies.downpour_worker), so a worker that dies only
loses itself: the task reports it, the others finish, and the run records the loss. A whole host lost (its
executor with it) loses only its workers too: the stage is an ordinary one, not a barrier stage (which Spark
restarts whole when one task fails, killing the survivors), and Spark's retry of a lost worker's task reports
the loss instead of training again, so the survivors' epochs are not repeated or held up. The server lives
in the driver (see parameter_server/server.py for the trade-off) and stops when training ends or fails.

Progress is counted on the server: once the pushed steps of all workers add up to an evaluation point
(``bookkeeping.evaluation_schedule``, counted in pushed steps), a monitor thread snapshots the server's parameters
on the training clock; the snapshots are evaluated after training, so evaluation never steals the workers' CPU. At
every epoch end the monitor checkpoints parameters, Adagrad state and the snapshots; a restarted job resumes from
there.

With ``communication`` off (the ceiling: ``train_without_communication``) the same workers run the same loop on the
same shards with no server: they never fetch or push, and worker 0 keeps its own parameters at its evaluation
points, evaluated after training. Its epochs add the workers' throughputs; it keeps no checkpoints (a retried
ceiling run starts over) and has no warm start.
"""

from __future__ import annotations

import collections
import functools
import io
import json
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training import sharding, storage
from training.strategies import bookkeeping
from training.strategies.base import EvaluationSet, TrainingResult
from training.strategies.downpour_worker import SNAPSHOTS_FILE
from training.strategies.placement import cores_per_node, driver_host, threads_per_worker, worker_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec
    from training.strategies.parameter_server.server import ParameterServer

log = logging.getLogger(__name__)

CALL_TIMEOUT_SECONDS = 60.0  # a worker gives up on a silent server after this long
MONITOR_SECONDS = 0.02


# --- Workers: one Spark task each, running the worker process -------------------------------------------------

LOST_WITH_ITS_EXECUTOR = -1000  # the returncode reported for a worker whose executor (host) was lost


def run_worker_process(partitions: Iterator[int], jobs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A Spark task: start this rank's worker process with its job, forward its output, report how it ended.
    A second attempt means the first one's executor was lost mid-training: report that worker lost."""
    from pyspark import TaskContext

    context = TaskContext.get()
    rank = context.partitionId()
    if context.attemptNumber() > 0:
        yield {"rank": rank, "returncode": LOST_WITH_ITS_EXECUTOR, "epochs": [], "totals": None,
               "log_tail": f"its Spark task was lost with its executor (attempt {context.attemptNumber()} of the "
                           f"task reports it instead of training again)"}
        return
    job = jobs[rank]
    with tempfile.TemporaryDirectory(prefix=f"cloudburst-downpour-{rank}-") as directory:
        report = Path(directory) / "report.jsonl"
        command = [sys.executable, "-m", "training.strategies.downpour_worker", "--rank", str(rank),
                   "--report", str(report), "--parent-pid", str(os.getpid())]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=worker_environment(), text=True)
        process.stdin.write(json.dumps(job))
        process.stdin.close()
        tail: collections.deque[str] = collections.deque(maxlen=40)
        for line in process.stdout:  # progress lines go to the executor's log as they come
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)
        returncode = process.wait()
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        ceiling_snapshots = None
        if report.with_name(SNAPSHOTS_FILE).exists():
            with np.load(report.with_name(SNAPSHOTS_FILE)) as saved:
                ceiling_snapshots = dict(saved)
    yield {"rank": rank, "returncode": returncode, "epochs": [row for row in rows if "epoch" in row],
           "totals": next((row for row in rows if row.get("done")), None),
           "log_tail": "".join(tail) if returncode else "", "snapshots": ceiling_snapshots}


# --- The monitor: evaluation snapshots and checkpoints, counted in pushed steps ---------------------------------


@dataclass
class EvaluationPoint:
    epoch: float  # e.g. 2.25: a quarter into the third epoch; a whole number at an epoch's end
    steps: int  # pushed steps (all workers together) since this job started, that complete the point
    train_seconds: float | None = None
    accuracy: float | None = None
    measures: dict[str, float] = field(default_factory=dict)  # Trainable.epoch_metrics, at epoch ends


@dataclass
class Progress:
    """What the monitor records; saved with every checkpoint."""

    points: list[EvaluationPoint]
    snapshots: list[np.ndarray] = field(default_factory=list)  # parameters at each reached point
    clock_offset_seconds: float = 0.0  # training seconds of earlier attempts (a resumed run)

    def reached(self) -> list[EvaluationPoint]:
        return self.points[: len(self.snapshots)]


class ServerCheckpoint:
    """The parameter server's shards as one ``.npz`` (the CheckpointStore state), and the evaluation snapshots.

    Each snapshot is written once, to ``<run>/checkpoints/snapshots/``, before the first checkpoint that counts
    it; a checkpoint records only how many there are. (Saving them all in every checkpoint made each epoch's
    checkpoint bigger than the last: on a 100 Mbit/s link the 30th epoch of a small MNIST run spent 17 s on it.)"""

    def __init__(self, server: ParameterServer, progress: Progress, run_uri: str) -> None:
        self.server, self.progress = server, progress
        self.snapshots = storage.resolve(storage.join(run_uri, "checkpoints", "snapshots"))
        self.written = 0

    def _snapshot_path(self, index: int) -> str:
        return f"{self.snapshots.path}/point-{index:05d}.npy"

    def write(self, prefix: str) -> None:
        count = len(self.progress.snapshots)
        if self.written < count:
            self.snapshots.fs.makedirs(self.snapshots.path, exist_ok=True)
        for index in range(self.written, count):
            with self.snapshots.fs.open(self._snapshot_path(index), "wb") as handle:
                np.save(handle, self.progress.snapshots[index])
        self.written = count
        np.savez(f"{prefix}.npz", **self.server.state(), snapshot_count=np.array(count))

    def read(self, prefix: str) -> None:
        with np.load(f"{prefix}.npz") as saved:
            self.server.restore({key: saved[key] for key in saved.files if key.startswith("shard")})
            count = int(saved["snapshot_count"])
        snapshots = []
        for index in range(count):
            with self.snapshots.fs.open(self._snapshot_path(index), "rb") as handle:
                snapshots.append(np.load(io.BytesIO(handle.read())))
        self.progress.snapshots, self.written = snapshots, count


class ProgressMonitor(threading.Thread):
    """Watches the server's applied steps: snapshots at evaluation points, checkpoints at epoch ends."""

    def __init__(self, server: ParameterServer, progress: Progress, on_epoch_end: Callable[[int], None]) -> None:
        super().__init__(name="downpour-monitor", daemon=True)
        self.server, self.progress = server, progress
        self.on_epoch_end = on_epoch_end
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def clock(self, at: float | None = None) -> float:
        started = self.server.statistics.first_fetch_time
        if started is None:
            return self.progress.clock_offset_seconds
        return self.progress.clock_offset_seconds + (time.perf_counter() if at is None else at) - started

    def run(self) -> None:
        try:
            while not self._stop_event.wait(MONITOR_SECONDS):
                self.take_due_snapshots()
        except BaseException as error:  # surfaced by stop(): a failed checkpoint must fail the run
            self.error = error

    def take_due_snapshots(self) -> None:
        applied = self.server.steps_applied()
        while len(self.progress.snapshots) < len(self.progress.points):
            point = self.progress.points[len(self.progress.snapshots)]
            if applied < point.steps:
                return
            point.train_seconds = self.clock()
            self.progress.snapshots.append(self.server.parameters())
            if bookkeeping.ends_epoch(point.epoch):
                self.on_epoch_end(round(point.epoch))

    def stop(self) -> float:
        """Stop watching after the workers ended; returns the final training clock."""
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise self.error
        self.take_due_snapshots()
        last_push = self.server.statistics.last_push_time
        return self.clock(last_push) if last_push is not None else self.progress.clock_offset_seconds


def evaluation_points(total_steps_per_epoch: int, evaluations_per_epoch: int, first_epoch: int,
                      epochs: int) -> list[EvaluationPoint]:
    """The evaluation schedule in pushed steps (all workers together), counted from ``first_epoch`` on."""
    return [EvaluationPoint(epoch=position, steps=steps) for position, steps in bookkeeping.evaluation_positions(
        total_steps_per_epoch, evaluations_per_epoch, first_epoch, epochs)]


# --- The strategy ------------------------------------------------------------------------------------------------


def flatten(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(array, np.float32).ravel() for array in arrays])


def unflatten(flat: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    parts = np.split(flat, np.cumsum([array.size for array in like])[:-1])
    return [part.reshape(array.shape) for part, array in zip(parts, like, strict=True)]


def steps_per_worker_epoch(shards_uri: str, spec: RunSpec) -> list[int]:
    """Each worker's steps per epoch, from the shard manifest (a worker may hold several shards), after the same
    check the train job makes (every worker has a shard and at least one batch) for callers that skip it."""
    from training.config import shard_rows

    manifest = storage.require_manifest(shards_uri, sharding.DATASET_KIND)
    spec.validate_shards(manifest["num_shards"], shard_rows(manifest))
    rows = [shard["rows"] for shard in manifest["shards"]]
    return [sum(rows[shard] for shard in sharding.shards_of_worker(rank, spec.total_workers, len(rows)))
            // spec.batch_size_per_worker for rank in range(spec.total_workers)]


class DownpourStrategy:
    """Downpour SGD: sharded parameter server in the driver, workers as Spark tasks running child processes."""

    name = "downpour"

    def train(self, spec: RunSpec, shards_uri: str, evaluation: EvaluationSet, run_uri: str,
              spark: SparkSession) -> TrainingResult:
        from training.models.model_files import save_run_model
        from training.strategies.checkpoints import CheckpointStore
        from training.strategies.evaluation_clock import correct_predictions
        from training.strategies.parameter_server.server import ParameterServer

        if not spec.communication:
            return train_without_communication(spec, shards_uri, evaluation, run_uri, spark)
        started = time.perf_counter()
        workload = spec.trainable()
        model = _servable_model(spec, workload)
        template = model.get_weights()
        worker_steps = steps_per_worker_epoch(shards_uri, spec)
        total_steps = sum(worker_steps)
        checkpoints = CheckpointStore(run_uri)
        resumed_from = checkpoints.latest_epoch()
        node_cores = cores_per_node(spark, spec)
        secret = secrets.token_bytes(32)  # per job: only this job's workers can fetch or push

        with ParameterServer(flatten(template), spec.ps_shards, secret, spec.server_optimizer,
                             spec.server_learning_rate, host=driver_host(spark), max_push_norm=spec.max_push_norm,
                             max_steps_per_push=spec.n_push, staleness_aware=spec.staleness_aware,
                             push_as_steps=spec.push_as_steps) as server:
            progress = Progress(points=evaluation_points(total_steps, spec.evaluations_per_epoch, 0, spec.epochs))
            state = ServerCheckpoint(server, progress, run_uri)
            statistics_before: dict[str, Any] = {}
            if resumed_from:
                history = checkpoints.restore(resumed_from, state)
                progress.clock_offset_seconds = history["training_seconds"]
                statistics_before = history["statistics"]
                progress.points = [EvaluationPoint(**point) for point in history["points"]] + evaluation_points(
                    total_steps, spec.evaluations_per_epoch, resumed_from, spec.epochs)
                # Steps restart at zero in this job: count the new points from here.
                log.info("[downpour] resuming after epoch %d from %s", resumed_from, checkpoints.where.uri)

            def on_epoch_end(epoch: int) -> None:
                history = {"training_seconds": monitor.clock(),
                           "points": [vars(point) for point in progress.reached()],
                           "statistics": _combined_statistics(statistics_before, server)}
                checkpoints.save(epoch, state, history)
                log.info("[downpour] epoch %d/%d pushed by all workers at %.1f s; checkpoint saved", epoch,
                         spec.epochs, history["training_seconds"])

            monitor = ProgressMonitor(server, progress, on_epoch_end)
            job = {"spec": spec.to_mapping(), "shards_uri": shards_uri, "addresses": server.addresses,
                   "bounds": server.bounds, "secret": secret.hex(), "threads": threads_per_worker(spec, node_cores),
                   "start_epoch": resumed_from, "timeout_seconds": CALL_TIMEOUT_SECONDS, "wait_for_version": 0}
            monitor.start()
            try:
                if resumed_from < spec.epochs:
                    log.info("[downpour] %d workers (%s), %d parameter shards at %s", spec.total_workers, spec.config,
                             spec.ps_shards, ", ".join(server.addresses))
                    outcomes = _run_workers(spark, spec, job, resumed_from)
                else:
                    outcomes = []
            finally:
                training_seconds = monitor.stop()
            statistics = _combined_statistics(statistics_before, server)
            final_parameters = server.parameters()

        lost = _lost_workers(outcomes)
        test_images, test_labels = evaluation.load(workload)
        reached = progress.reached()
        for point, snapshot in zip(reached, progress.snapshots, strict=True):
            model.set_weights(unflatten(snapshot, template))
            point.accuracy = correct_predictions(model, test_images, test_labels) / len(test_labels)
            if bookkeeping.ends_epoch(point.epoch):
                point.measures = workload.measure_epoch(model)
        model.set_weights(unflatten(final_parameters, template))
        final_accuracy = correct_predictions(model, test_images, test_labels) / len(test_labels)
        epochs = _epoch_rows(spec, reached, outcomes, total_steps, training_seconds, final_accuracy,
                             server_steps=statistics["steps_applied"], first_epoch=resumed_from)
        evaluations = [bookkeeping.evaluation(point.train_seconds, point.epoch, point.accuracy) for point in reached]
        time_to_target = bookkeeping.time_to_target(evaluations, spec.target_accuracy)
        metrics, extra = _observations(statistics, outcomes, lost)
        log.info("[downpour] %d pushes, %d fetches, %.1f MB moved, staleness mean %.2f max %d, %d worker(s) lost",
                 statistics["pushes"], statistics["fetches"], metrics["bytes_moved"] / 1e6, metrics["staleness_mean"],
                 metrics["staleness_max"], len(lost))
        return TrainingResult(
            epochs=epochs, evaluations=evaluations, wall_seconds=time.perf_counter() - started,
            training_seconds=training_seconds, time_to_target_seconds=time_to_target,
            model_uri=save_run_model(run_uri, model), total_workers=spec.total_workers, resumed_from_epoch=resumed_from,
            extra={"threads_per_worker": threads_per_worker(spec, node_cores), "steps_per_epoch": total_steps,
                   "communication": True, **extra},
            metrics=metrics,
        )


def train_without_communication(spec: RunSpec, shards_uri: str, evaluation: EvaluationSet, run_uri: str,
                                spark: SparkSession) -> TrainingResult:
    """The ceiling: Downpour's workers on their shards with no parameter server; worker 0's model is evaluated at
    its own evaluation points (on its own clock) and saved."""
    from training.models.model_files import save_run_model
    from training.strategies.evaluation_clock import correct_predictions

    started = time.perf_counter()
    workload = spec.trainable()
    model = _servable_model(spec, workload)  # the same models as with communication, so the two compare
    template = model.get_weights()
    total_steps = sum(steps_per_worker_epoch(shards_uri, spec))
    threads = threads_per_worker(spec, cores_per_node(spark, spec))
    job = {"spec": spec.to_mapping(), "shards_uri": shards_uri, "threads": threads, "start_epoch": 0,
           "wait_for_version": 0}
    log.info("[downpour] %d workers (%s) without communication (the ceiling): no parameter server",
             spec.total_workers, spec.config)
    outcomes = _run_workers(spark, spec, job, resumed_from=0)
    lost = _lost_workers(outcomes)
    snapshots = outcomes[0].get("snapshots")  # a worker lost with its executor reports none
    if outcomes[0]["returncode"] != 0 or snapshots is None:
        raise RuntimeError(f"the ceiling evaluates worker 0's model, but worker 0 was lost:\n"
                           f"{outcomes[0]['log_tail']}")

    test_images, test_labels = evaluation.load(workload)
    evaluations, measures = [], {}
    for clock, position, parameters in zip(snapshots["clock"], snapshots["positions"], snapshots["parameters"],
                                           strict=True):
        model.set_weights(unflatten(parameters, template))
        accuracy = correct_predictions(model, test_images, test_labels) / len(test_labels)
        evaluations.append(bookkeeping.evaluation(clock, position, accuracy))
        if bookkeeping.ends_epoch(position):
            measures[round(position)] = workload.measure_epoch(model)
    epochs = []  # the model now holds worker 0's final parameters: the last point ends the last epoch
    for record in bookkeeping.epoch_end_evaluations(evaluations):
        epoch = round(record["epoch"])
        reports = [row for outcome in outcomes for row in outcome["epochs"] if row["epoch"] == epoch]
        examples = [row["examples"] for row in reports]
        epochs.append({**bookkeeping.epoch_row(
            epoch, bookkeeping.weighted_mean([row["train_loss"] for row in reports], examples),
            bookkeeping.weighted_mean([row["train_accuracy"] for row in reports], examples), record["val_accuracy"],
            bookkeeping.independent_epoch_seconds(examples, [row["seconds"] for row in reports]), sum(examples)),
            **measures[epoch]})
    nothing_sent = {"fetches": 0, "pushes": 0, "rejected": 0, "non_finite_pushes": 0, "clipped_pushes": 0,
                    "bytes_moved": 0, "staleness": {}}
    metrics, extra = _observations(nothing_sent, outcomes, lost)
    metrics["evaluation_bytes"] = int(snapshots["parameters"].nbytes)  # to the driver after training, to measure
    return TrainingResult(
        epochs=epochs, evaluations=evaluations, wall_seconds=time.perf_counter() - started,
        training_seconds=max(outcome["totals"]["training_seconds"] for outcome in outcomes if outcome["totals"]),
        time_to_target_seconds=bookkeeping.time_to_target(evaluations, spec.target_accuracy),
        model_uri=save_run_model(run_uri, model), total_workers=spec.total_workers,
        extra={"threads_per_worker": threads, "steps_per_epoch": total_steps, "communication": False, **extra},
        metrics=metrics,
    )


def _servable_model(spec: RunSpec, workload: Any) -> Any:
    """The workload's model, refused when it holds state a parameter server cannot serve."""
    model = workload.build_model()
    if model.non_trainable_weights:
        raise ValueError(f"{spec.workload}: Downpour serves trainable parameters only; this model also has "
                         f"non-trainable state ({model.non_trainable_weights[0].name}) that workers would "
                         f"keep to themselves")
    return model


def _lost_workers(outcomes: list[dict]) -> list[dict]:
    """The workers that did not finish, each logged; all of them lost fails the run."""
    lost = [outcome for outcome in outcomes if outcome["returncode"] != 0]
    for outcome in lost:
        log.warning("[downpour] worker %d was lost (exit status %d); the others carried on. Its last output:\n%s",
                    outcome["rank"], outcome["returncode"], outcome["log_tail"])
    if outcomes and len(lost) == len(outcomes):
        raise RuntimeError(f"all {len(outcomes)} Downpour workers failed; the first said:\n{lost[0]['log_tail']}")
    return lost


def _run_workers(spark: SparkSession, spec: RunSpec, job: dict[str, Any], resumed_from: int) -> list[dict]:
    """All workers as one stage, a task each; with a warm start, worker 0 trains alone first."""
    from training.strategies.downpour_worker import wait_version

    jobs = [job] * spec.total_workers
    if spec.communication and spec.warm_start_steps and not resumed_from and spec.total_workers > 1:
        version = wait_version(spec.n_push, spec.warm_start_steps)
        jobs = [job] + [{**job, "wait_for_version": version}] * (spec.total_workers - 1)
    task = functools.partial(run_worker_process, jobs=jobs)
    outcomes = spark.sparkContext.parallelize(range(spec.total_workers), spec.total_workers) \
        .mapPartitions(task).collect()
    return sorted(outcomes, key=lambda outcome: outcome["rank"])


def _combined_statistics(before: dict[str, Any], server: ParameterServer) -> dict[str, Any]:
    """The server's counters plus those of earlier attempts of this run; staleness as value → count."""
    current = server.statistics
    staleness = collections.Counter({int(value): count for value, count in before.get("staleness", {}).items()})
    staleness.update(current.staleness)
    return {"fetches": before.get("fetches", 0) + current.fetches,
            "pushes": before.get("pushes", 0) + current.pushes,
            "rejected": before.get("rejected", 0) + current.rejected,
            "non_finite_pushes": before.get("non_finite_pushes", 0) + current.non_finite_pushes,
            "clipped_pushes": before.get("clipped_pushes", 0) + current.clipped_pushes,
            "bytes_moved": before.get("bytes_moved", 0) + current.bytes_in + current.bytes_out,
            "steps_applied": server.steps_applied(),
            "staleness": {str(value): count for value, count in sorted(staleness.items())}}


def _observations(statistics: dict[str, Any], outcomes: list[dict], lost: list[dict]) -> tuple[dict, dict]:
    """MLflow metrics (numbers) and tags/extras of a run."""
    counts = {int(value): count for value, count in statistics["staleness"].items()}
    pushes = sum(counts.values())
    worker_totals = [outcome["totals"] for outcome in outcomes if outcome["totals"]]
    busy = [sum(row["seconds"] for row in outcome["epochs"]) for outcome in outcomes if outcome["totals"]]
    metrics = {
        "pushes": statistics["pushes"], "fetches": statistics["fetches"], "bytes_moved": statistics["bytes_moved"],
        "rejected_messages": statistics["rejected"], "non_finite_pushes": statistics["non_finite_pushes"],
        "clipped_pushes": statistics["clipped_pushes"],
        "staleness_mean": sum(value * count for value, count in counts.items()) / pushes if pushes else 0.0,
        "staleness_max": max(counts, default=0), "lost_workers": len(lost),
    }
    if worker_totals and sum(busy) > 0:
        metrics["communication_fraction"] = sum(totals["communication_seconds"] for totals in worker_totals) \
            / sum(busy)
    extra = {"lost_workers": len(lost), "lost_worker_ranks": ",".join(str(o["rank"]) for o in lost) or "none",
             "staleness_counts": statistics["staleness"], "workers": worker_totals}
    return metrics, extra


def _epoch_rows(spec: RunSpec, reached: list[EvaluationPoint], outcomes: list[dict], total_steps: int,
                training_seconds: float, final_accuracy: float, server_steps: int,
                first_epoch: int) -> list[dict[str, Any]]:
    """Shared per-epoch metrics: an epoch ends when all workers' pushed steps complete it; train loss and
    accuracy are the workers' own, weighted by examples (unknown for epochs of an earlier attempt)."""
    ends = [point for point in reached if bookkeeping.ends_epoch(point.epoch)]
    rows, previous_clock = [], 0.0
    for point in ends:
        rows.append(_row(round(point.epoch), outcomes, total_steps * spec.batch_size_per_worker,
                         point.train_seconds - previous_clock, point.accuracy))
        rows[-1].update(point.measures)
        previous_clock = point.train_seconds
    if len(ends) < spec.epochs and outcomes:  # lost workers: the last epoch was never completed
        # Steps count from this job's start; an end reached by an earlier attempt lies before it.
        last_end_steps = ends[-1].steps if ends and round(ends[-1].epoch) > first_epoch else 0
        partial_steps = server_steps - last_end_steps
        if partial_steps > 0 and training_seconds > previous_clock:
            rows.append(_row(len(ends) + 1, outcomes, partial_steps * spec.batch_size_per_worker,
                             training_seconds - previous_clock, final_accuracy))
    return rows


def _row(epoch: int, outcomes: list[dict], samples: int, seconds: float, accuracy: float) -> dict[str, Any]:
    reports = [row for outcome in outcomes for row in outcome["epochs"] if row["epoch"] == epoch]
    examples = [row["examples"] for row in reports]
    return bookkeeping.epoch_row(epoch, bookkeeping.weighted_mean([row["train_loss"] for row in reports], examples),
                                 bookkeeping.weighted_mean([row["train_accuracy"] for row in reports], examples),
                                 accuracy, seconds, samples)
