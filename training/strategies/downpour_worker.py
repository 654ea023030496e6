"""One Downpour SGD worker (Dean et al. 2012, the DownpourSGDClient): a process of its own, started by a Spark
task, that trains on its shard and talks only to the parameter server.

Every ``n_fetch`` steps it replaces its parameters with the server's; every step it computes a gradient, adds it
to an accumulator and takes a local step; every ``n_push`` steps it pushes the accumulated gradient. It never
waits for another worker. Being a child process lets the Spark task outlive it: a worker that dies is recorded
as lost while the others finish. A push the server refuses (or a gradient with NaN or ±Inf, which is never
sent) stops the worker with the reason as its last line, and the run records it as lost.

With ``communication`` off (the ceiling) the same loop runs without a server: no fetch, no push, the local
optimizer's steps are the only updates, and worker 0 keeps its parameters at its evaluation points for the driver
to evaluate after training (``snapshots.npz`` beside the report). The worker chooses this once, at its start: the
loop calls the same methods of its exchange, a ``ServerExchange`` or the ceiling's ``WorkerAlone``.

    python -m training.strategies.downpour_worker --rank 0 --report /tmp/report.jsonl < job.json

The job (run spec, shards, server addresses and the per-job secret) arrives on stdin, so the secret never
appears in a process listing. One JSON line per finished epoch, and a last one with totals, go to ``--report``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from training.config import RunSpec
    from training.strategies.downpour_replica import Replica

PR_SET_PDEATHSIG = 1
SNAPSHOTS_FILE = "snapshots.npz"  # the ceiling's worker 0 leaves its evaluation snapshots here, beside the report


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to kill this process when its parent (the Spark task) goes, so no worker outlives its job."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return  # not Linux: the server's call timeouts still end an orphan
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        sys.exit("parent process is gone")


class Report:
    """Append-only JSON lines, flushed at once: what a killed worker finished is still there."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")


def train_worker(job: dict[str, Any], rank: int, report: Report) -> dict[str, Any]:
    """The DownpourSGDClient loop; returns the worker's totals."""
    import tensorflow as tf

    from training.config import RunSpec
    from training.models.optimizers import make_optimizer
    from training.strategies.downpour_replica import Replica
    from training.strategies.input_pipeline import training_dataset
    from training.strategies.placement import configure_tensorflow_threads

    spec = RunSpec.from_mapping(job["spec"])
    configure_tensorflow_threads(job["threads"])
    tf.get_logger().setLevel("ERROR")
    tf.keras.utils.set_random_seed(spec.seed + rank)

    workload = spec.trainable()
    images, labels = workload.load_shard(job["shards_uri"], rank, spec.total_workers)
    steps_per_epoch = len(labels) // spec.batch_size_per_worker
    if steps_per_epoch < 1:
        raise ValueError(f"worker {rank}: a shard of {len(labels)} examples is smaller than one batch of "
                         f"{spec.batch_size_per_worker}")
    start_epoch = job["start_epoch"]
    dataset = training_dataset(images, labels, spec.batch_size_per_worker, seed=spec.seed + 1000 * rank + start_epoch,
                               augment=workload.augment_batch, augment_seed=(spec.seed, rank),
                               first_batch=start_epoch * steps_per_epoch)
    replica = Replica(workload.build_model(), workload.make_loss(),
                      make_optimizer(spec.server_optimizer, spec.server_learning_rate))

    clock = TrainingClock()
    exchange = worker_exchange(job, rank, spec, replica, clock, steps_per_epoch)
    try:
        joined_at_version = exchange.join()
        batches = iter(dataset)
        clock.start()
        for epoch in range(start_epoch, spec.epochs):
            workload.start_epoch(epoch)
            row = train_epoch(epoch + 1, replica, exchange, batches, steps_per_epoch, spec.batch_size_per_worker,
                              clock)
            report.write(row)
            print(f"[downpour] worker {rank} {describe_worker_epoch(row, spec.epochs)}", flush=True)
        exchange.finish()
        training_seconds = clock.seconds()
    finally:
        exchange.close()
    exchange.leave_snapshots(report.path.with_name(SNAPSHOTS_FILE))  # off the training clock: training is over
    totals = {"done": True, "rank": rank, "steps": exchange.steps, "steps_per_epoch": steps_per_epoch,
              "joined_at_version": joined_at_version, **exchange.traffic(), "training_seconds": training_seconds}
    report.write(totals)
    return totals


def train_epoch(epoch_number: int, replica: Replica, exchange: ServerExchange | WorkerAlone,
                batches: Iterator[Any], steps: int, batch_size: int, clock: TrainingClock) -> dict[str, Any]:
    """One epoch of local steps, with the exchange's fetches and pushes between them; the epoch's report row."""
    from training.strategies.downpour_replica import mean_loss_and_accuracy

    started, off_clock_before = time.perf_counter(), clock.off_seconds
    losses, corrects = [], []
    for _ in range(steps):
        exchange.before_step()
        loss, correct = replica.train_step(*next(batches))
        losses.append(loss)
        corrects.append(correct)
        exchange.after_step()
    seconds = time.perf_counter() - started - (clock.off_seconds - off_clock_before)
    examples = steps * batch_size
    train_loss, train_accuracy = mean_loss_and_accuracy(losses, corrects, examples)
    return {"epoch": epoch_number, "train_loss": train_loss, "train_accuracy": train_accuracy, "examples": examples,
            "seconds": seconds}


def describe_worker_epoch(row: dict[str, Any], epochs: int) -> str:
    """A worker's progress line, e.g. ``epoch 2/5: loss 0.1234 accuracy 0.9600 1.5 s 1300 samples/s``."""
    return (f"epoch {row['epoch']}/{epochs}: loss {row['train_loss']:.4f} accuracy {row['train_accuracy']:.4f} "
            f"{row['seconds']:.1f} s {row['examples'] / row['seconds']:.0f} samples/s")


class TrainingClock:
    """Seconds of training since ``start``, less the time spent off the clock (the ceiling's snapshots)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.off_seconds = 0.0

    def start(self) -> None:
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.started - self.off_seconds

    @contextmanager
    def paused(self) -> Iterator[None]:
        paused_at = time.perf_counter()
        try:
            yield
        finally:
            self.off_seconds += time.perf_counter() - paused_at


class ServerExchange:
    """The worker's side of the parameter server, as in the paper's client: every ``n_fetch`` steps it replaces its
    parameters with the server's, every ``n_push`` steps it pushes the gradient accumulated since. Both run
    asynchronously: a push is on the wire while the next steps compute, and a fetch requested at step s is applied
    at step s + n_fetch (or later, if it is still on the way)."""

    def __init__(self, job: dict[str, Any], rank: int, spec: RunSpec, replica: Replica) -> None:
        from training.strategies.parameter_server.client import BackgroundClient, ParameterClient

        def connect() -> ParameterClient:
            return ParameterClient(job["addresses"], [tuple(bound) for bound in job["bounds"]],
                                   bytes.fromhex(job["secret"]), worker=rank, timeout_seconds=job["timeout_seconds"])

        self.rank, self.spec, self.replica = rank, spec, replica
        self.wait_for_version = job["wait_for_version"]
        self.client = BackgroundClient(connect)
        self.steps = self.unpushed = 0
        self.fetch_pending = False

    def join(self) -> int:
        """Start from the server's parameters (after worker 0's warm start, if told to wait for it); returns the
        server version joined at."""
        self.replica.set_parameters(self.client.fetch_now())
        if self.wait_for_version:  # warm start: worker 0 trains alone until the server reached this version
            print(f"[downpour] worker {self.rank} waits for the warm start ({self.wait_for_version} pushes)",
                  flush=True)
            while self.client.versions[0] < self.wait_for_version:
                time.sleep(0.2)
                self.replica.set_parameters(self.client.fetch_now())
        return self.client.versions[0]

    def before_step(self) -> None:
        """Every n_fetch steps: apply the fetch that has arrived, and request the next one."""
        if self.steps % self.spec.n_fetch:
            return
        if self.fetch_pending and (fetched := self.client.take_fetched()) is not None:
            self.replica.apply_fetched(fetched)
            self.fetch_pending = False
        if not self.fetch_pending:
            self.replica.remember_parameters()
            self.client.request_fetch()
            self.fetch_pending = True

    def after_step(self) -> None:
        self.steps += 1
        self.unpushed += 1
        if self.unpushed == self.spec.n_push:
            self._push()

    def _push(self) -> None:
        self.client.push(self.replica.take_accumulated().numpy(), self.unpushed)
        self.unpushed = 0

    def finish(self) -> None:
        """Push what the last steps accumulated."""
        if self.unpushed:
            self._push()

    def close(self) -> None:
        self.client.close()

    def leave_snapshots(self, path: Path) -> None:
        pass  # the server's monitor snapshots the parameters it holds

    def traffic(self) -> dict[str, Any]:
        return {"bytes_sent": self.client.bytes_sent, "bytes_received": self.client.bytes_received,
                "communication_seconds": self.client.waiting_seconds}


class WorkerAlone:
    """The ceiling's stand-in for the exchange: no server to fetch from, push to or wait for. The accumulated
    gradient is still taken every ``n_push`` steps (the ceiling computes what a run does, then sends nothing), and
    ``snapshot_at`` (worker 0's evaluation points: its steps, its clock) keeps the parameters for the driver to
    evaluate after training, as it does the server's snapshots."""

    def __init__(self, spec: RunSpec, replica: Replica, clock: TrainingClock, snapshot_at: dict[int, float]) -> None:
        self.spec, self.replica, self.clock = spec, replica, clock
        self.snapshot_at = snapshot_at  # steps since this job started → epoch position
        self.snapshots: list[np.ndarray] = []
        self.snapshot_clock: list[float] = []
        self.steps = 0

    def join(self) -> int:
        return 0

    def before_step(self) -> None:
        pass

    def after_step(self) -> None:
        self.steps += 1
        if self.steps % self.spec.n_push == 0:
            self.replica.take_accumulated()
        if self.steps in self.snapshot_at:
            with self.clock.paused():
                self.snapshot_clock.append(self.clock.seconds())
                self.snapshots.append(self.replica.parameters().numpy())

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass

    def leave_snapshots(self, path: Path) -> None:
        """Write the snapshots beside the report (``SNAPSHOTS_FILE``), for the driver."""
        if self.snapshots:
            reached = sorted(self.snapshot_at)[:len(self.snapshots)]
            np.savez(path, clock=np.array(self.snapshot_clock),
                     positions=np.array([self.snapshot_at[steps] for steps in reached]),
                     parameters=np.stack(self.snapshots))

    def traffic(self) -> dict[str, Any]:
        return {"bytes_sent": 0, "bytes_received": 0, "communication_seconds": 0.0}


def worker_exchange(job: dict[str, Any], rank: int, spec: RunSpec, replica: Replica, clock: TrainingClock,
                    steps_per_epoch: int) -> ServerExchange | WorkerAlone:
    """The parameter server's exchange, or with communication off the ceiling's worker alone (worker 0 keeping
    snapshots at its evaluation points)."""
    from training.strategies.bookkeeping import evaluation_positions

    if spec.communication:
        return ServerExchange(job, rank, spec, replica)
    snapshot_at = {} if rank else {steps: position for position, steps in evaluation_positions(
        steps_per_epoch, spec.evaluations_per_epoch, job["start_epoch"], spec.epochs)}
    return WorkerAlone(spec, replica, clock, snapshot_at)


def wait_version(pushes: int, steps: int) -> int:
    """The shard version worker 0 reaches after ``steps`` warm-start steps pushed every ``pushes`` steps."""
    return math.ceil(steps / pushes) if steps else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank", type=int, required=True, help="this worker's number, 0 … workers − 1")
    parser.add_argument("--report", type=Path, required=True, help="JSON-lines file for per-epoch results")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit with this process (the Spark task)")
    args = parser.parse_args(argv)
    if args.parent_pid:
        die_with_parent(args.parent_pid)
    from training.strategies.parameter_server.client import ServerError
    from training.strategies.parameter_server.shards import NonFiniteError

    try:
        train_worker(json.loads(sys.stdin.read()), args.rank, Report(args.report))
    except (ServerError, NonFiniteError) as error:
        # A refused push is never skipped silently: the worker stops, its Spark task reports it, the run records
        # it as lost (lost_workers) and the others carry on. A diverged worker would only push NaN again.
        sys.exit(f"[downpour] worker {args.rank} stops: {error}")


if __name__ == "__main__":
    main()
