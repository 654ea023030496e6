"""One Downpour SGD worker (Dean et al. 2012, the DownpourSGDClient): a process of its own, started by a Spark
task, that trains on its shard and talks only to the parameter server.

Every ``n_fetch`` steps it replaces its parameters with the server's; every step it computes a gradient, adds it
to an accumulator and takes a local step; every ``n_push`` steps it pushes the accumulated gradient. It never
waits for another worker. Being a child process lets the Spark task outlive it: a worker that dies is recorded
as lost while the others finish. A push the server refuses (or a gradient with NaN or ±Inf, which is never
sent) stops the worker with the reason as its last line, and the run records it as lost.

With ``communication`` off (the ceiling) the same loop runs without a server: no fetch, no push, the local
optimizer's steps are the only updates, and worker 0 keeps its parameters at its evaluation points for the driver
to evaluate after training (``snapshots.npz`` beside the report).

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
from pathlib import Path
from typing import Any

import numpy as np

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
    from training.strategies.bookkeeping import evaluation_positions
    from training.strategies.input_pipeline import training_dataset
    from training.strategies.parameter_server.client import BackgroundClient, ParameterClient
    from training.strategies.placement import configure_tensorflow_threads
    from training.workloads import workload_for

    spec = RunSpec.from_mapping(job["spec"])
    configure_tensorflow_threads(job["threads"])
    tf.get_logger().setLevel("ERROR")
    tf.keras.utils.set_random_seed(spec.seed + rank)

    workload = workload_for(spec)
    images, labels = workload.load_shard(job["shards_uri"], rank, spec.total_workers)
    steps_per_epoch = len(labels) // spec.batch_size_per_worker
    if steps_per_epoch < 1:
        raise ValueError(f"worker {rank}: a shard of {len(labels)} examples is smaller than one batch of "
                         f"{spec.batch_size_per_worker}")
    start_epoch = job["start_epoch"]
    dataset = training_dataset(images, labels, spec.batch_size_per_worker, seed=spec.seed + 1000 * rank + start_epoch,
                               augment=workload.augment_batch, augment_seed=(spec.seed, rank),
                               first_batch=start_epoch * steps_per_epoch)

    model = workload.build_model()
    variables = model.trainable_variables
    sizes = [int(np.prod(variable.shape)) for variable in variables]
    loss_function = workload.make_loss()
    local_optimizer = make_optimizer(spec.server_optimizer, spec.server_learning_rate)
    accumulated = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in variables]

    @tf.function
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = loss_function(labels, logits)
        gradients = tape.gradient(loss, variables)
        for total, gradient in zip(accumulated, gradients, strict=True):
            total.assign_add(gradient)
        local_optimizer.apply_gradients(zip(gradients, variables, strict=True))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=labels.dtype), labels),
                                        tf.float32))
        return loss, correct

    @tf.function
    def take_accumulated() -> tf.Tensor:
        flat = tf.concat([tf.reshape(total, [-1]) for total in accumulated], axis=0)
        for total in accumulated:
            total.assign(tf.zeros_like(total))
        return flat

    @tf.function
    def set_parameters(flat: tf.Tensor) -> None:
        for variable, part in zip(variables, tf.split(flat, sizes), strict=True):
            variable.assign(tf.reshape(part, variable.shape))

    # A fetch arrives n_fetch steps after it was requested; the local steps taken meanwhile are not in it yet
    # (their gradients are pushed only now), so they are kept: parameters = fetched + (local now − local then).
    at_request = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in variables]

    @tf.function
    def remember_parameters() -> None:
        for saved, variable in zip(at_request, variables, strict=True):
            saved.assign(variable)

    @tf.function
    def apply_fetched(flat: tf.Tensor) -> None:
        for variable, saved, part in zip(variables, at_request, tf.split(flat, sizes), strict=True):
            variable.assign(tf.reshape(part, variable.shape) + variable - saved)

    def connect() -> ParameterClient:
        return ParameterClient(job["addresses"], [tuple(bound) for bound in job["bounds"]],
                               bytes.fromhex(job["secret"]), worker=rank, timeout_seconds=job["timeout_seconds"])

    @tf.function
    def current_parameters() -> tf.Tensor:
        return tf.concat([tf.reshape(variable, [-1]) for variable in variables], axis=0)

    # The ceiling: worker 0's parameters at its own evaluation points (its steps, its clock), evaluated by the
    # driver after training as the server's snapshots are.
    snapshot_at: dict[int, float] = {}  # steps since this job started → epoch position
    if not spec.communication and rank == 0:
        snapshot_at = {steps: position for position, steps in evaluation_positions(
            steps_per_epoch, spec.evaluations_per_epoch, start_epoch, spec.epochs)}
    snapshots: list[np.ndarray] = []
    snapshot_clock: list[float] = []

    # As in the paper's client, fetches and pushes run asynchronously: a push is on the wire while the next steps
    # compute, and a fetch requested at step s is applied at step s + n_fetch (or later, if it is still on the way).
    client = BackgroundClient(connect) if spec.communication else LocalClient()
    try:
        if spec.communication:
            set_parameters(client.fetch_now())
        # Warm start: worker 0 trains alone until the server reached this version (the ceiling has no server).
        if spec.communication and job["wait_for_version"]:
            print(f"[downpour] worker {rank} waits for the warm start ({job['wait_for_version']} pushes)", flush=True)
            while client.versions[0] < job["wait_for_version"]:
                time.sleep(0.2)
                set_parameters(client.fetch_now())
        joined_at_version = client.versions[0]
        batches = iter(dataset)
        step, unpushed, fetch_pending = 0, 0, False
        training_started, snapshot_seconds = time.perf_counter(), 0.0
        for epoch in range(start_epoch, spec.epochs):
            workload.start_epoch(epoch)
            epoch_started, epoch_snapshot_seconds = time.perf_counter(), 0.0
            losses, corrects = [], []
            for _ in range(steps_per_epoch):
                if spec.communication and step % spec.n_fetch == 0:
                    if fetch_pending and (fetched := client.take_fetched()) is not None:
                        apply_fetched(fetched)
                        fetch_pending = False
                    if not fetch_pending:
                        remember_parameters()
                        client.request_fetch()
                        fetch_pending = True
                batch_images, batch_labels = next(batches)
                loss, correct = train_step(batch_images, batch_labels)
                losses.append(loss)
                corrects.append(correct)
                step += 1
                unpushed += 1
                if unpushed == spec.n_push:
                    accumulated_gradient = take_accumulated()  # the ceiling computes it too, then sends nothing
                    if spec.communication:
                        client.push(accumulated_gradient.numpy(), unpushed)
                    unpushed = 0
                if step in snapshot_at:
                    taken = time.perf_counter()
                    snapshot_clock.append(taken - training_started - snapshot_seconds)
                    snapshots.append(current_parameters().numpy())
                    spent = time.perf_counter() - taken
                    snapshot_seconds += spent
                    epoch_snapshot_seconds += spent
            seconds = time.perf_counter() - epoch_started - epoch_snapshot_seconds
            examples = steps_per_epoch * spec.batch_size_per_worker
            row = {"epoch": epoch + 1, "train_loss": float(tf.reduce_mean(losses)),
                   "train_accuracy": float(tf.reduce_sum(corrects)) / examples, "examples": examples,
                   "seconds": seconds}
            report.write(row)
            print(f"[downpour] worker {rank} epoch {epoch + 1}/{spec.epochs}: loss {row['train_loss']:.4f} "
                  f"accuracy {row['train_accuracy']:.4f} {seconds:.1f} s {examples / seconds:.0f} samples/s",
                  flush=True)
        if unpushed and spec.communication:
            client.push(take_accumulated().numpy(), unpushed)
        training_seconds = time.perf_counter() - training_started - snapshot_seconds
    finally:
        client.close()
    if snapshots:  # off the training clock: the worker's training is over
        np.savez(report.path.with_name(SNAPSHOTS_FILE), clock=np.array(snapshot_clock),
                 positions=np.array([snapshot_at[steps] for steps in sorted(snapshot_at)[:len(snapshots)]]),
                 parameters=np.stack(snapshots))
    totals = {"done": True, "rank": rank, "steps": step, "steps_per_epoch": steps_per_epoch,
              "joined_at_version": joined_at_version, "bytes_sent": client.bytes_sent,
              "bytes_received": client.bytes_received, "communication_seconds": client.waiting_seconds,
              "training_seconds": training_seconds}
    report.write(totals)
    return totals


class LocalClient:
    """The ceiling's stand-in for the parameter client: nothing to fetch, push or wait for."""

    versions = (0,)
    bytes_sent = bytes_received = 0
    waiting_seconds = 0.0

    def close(self) -> None:
        pass


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
