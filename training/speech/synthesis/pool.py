"""The worker pool: jobs run in spawned processes (a fresh interpreter each, so the caller's signal handlers never
reach them); a worker that dies or outlasts ``TASK_TIMEOUT_SECONDS`` fails the corpus naming its job."""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from signal import Signals
from typing import NamedTuple

import numpy as np

from training.speech.synthesis.jobs import NoiseJob, SpeakerJob, describe_job, run_job

log = logging.getLogger(__name__)

# One speaker's (or background noise's) work; the slowest, a festival HTS speaker of all 35 words with two
# repetitions, takes about 3 s.
TASK_TIMEOUT_SECONDS = 300.0


class SynthesisWorkerError(RuntimeError):
    """A synthesis worker died, or did not finish its job in time; the message names the speaker (or noise)."""


def _serve_jobs(connection: Connection) -> None:
    """A worker's life: run each job that arrives on ``connection``, send back its result or its exception."""
    while True:
        try:
            job = connection.recv()
        except (EOFError, KeyboardInterrupt):
            return  # the parent closed its end (all done) or is going away; Ctrl-C is the parent's to handle
        try:
            reply = ("done", run_job(job))
        except BaseException as error:
            sent = error
            try:
                pickle.loads(pickle.dumps(error))
            except Exception:  # an exception type that does not survive pickling: send its text instead
                sent = RuntimeError(f"{type(error).__name__}: {error}")
            sent.add_note(f"(raised in the synthesis worker for {describe_job(job)}; worker traceback:\n"
                          f"{traceback.format_exc().rstrip()})")
            reply = ("failed", sent)
        connection.send(reply)


def run_jobs(jobs: list[SpeakerJob | NoiseJob], processes: int, total: int,
              progress: Callable[[int, int], None] | None, task_timeout_seconds: float) -> list[str]:
    """Run every job (in worker processes unless one process), report progress; returns the clips' relative paths."""
    clips: list[str] = []
    next_log = 0.1

    def finished(number: int, written: list[str]) -> None:
        nonlocal next_log
        if number < 0:
            return  # background noise
        clips.extend(written)
        if progress is not None:
            progress(len(clips), total)
        if len(clips) / total >= next_log - 1e-9 or len(clips) == total:
            log.info("synthesized %d/%d utterances (%.0f %%)", len(clips), total, 100 * len(clips) / total)
            next_log = np.floor(len(clips) / total * 10 + 1e-9) / 10 + 0.1

    if processes == 1:
        for job in jobs:
            finished(*run_job(job))
    else:
        _run_in_workers(jobs, processes, task_timeout_seconds, finished)
    return sorted(clips)


class _Worker(NamedTuple):
    process: multiprocessing.process.BaseProcess
    connection: Connection  # this end of the worker's pipe


def _run_in_workers(jobs: list[SpeakerJob | NoiseJob], processes: int, task_timeout_seconds: float,
                    finished: Callable[[int, list[str]], None]) -> None:
    """Run the jobs on ``processes`` spawned workers, one job per worker at a time, passing results to ``finished``.

    A worker that dies, or a job without a result after ``task_timeout_seconds``, raises SynthesisWorkerError
    naming the job's speaker; a job's own exception is raised here. Every worker has ended when this returns.
    """
    # spawn, not fork: a forked worker would inherit this process's signal handlers (after a Horovod run, ones
    # that ignore SIGTERM), its threads' held locks and its open sockets.
    context = multiprocessing.get_context("spawn")
    waiting = list(reversed(jobs))
    workers: list[_Worker] = []
    running: dict[_Worker, tuple[SpeakerJob | NoiseJob, float]] = {}  # worker → (its job, deadline)

    def hand_out(worker: _Worker) -> None:
        if waiting:
            job = waiting.pop()
            worker.connection.send(job)
            running[worker] = (job, time.monotonic() + task_timeout_seconds)

    try:
        for _ in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve_jobs, args=(theirs,), name="cloudburst-synthesis", daemon=True)
            process.start()
            theirs.close()
            workers.append(_Worker(process, ours))
        for worker in workers:
            hand_out(worker)
        while running:
            nearest = min(deadline for _, deadline in running.values())
            wait([worker.connection for worker in running] + [worker.process.sentinel for worker in running],
                 timeout=max(0.0, nearest - time.monotonic()))
            for worker, (job, deadline) in list(running.items()):
                if worker.connection.poll():
                    try:
                        outcome, value = worker.connection.recv()
                    except EOFError:
                        raise _worker_died(worker, job) from None
                    del running[worker]
                    if outcome == "failed":
                        raise value
                    finished(*value)
                    hand_out(worker)
                elif not worker.process.is_alive():
                    raise _worker_died(worker, job)
                elif time.monotonic() >= deadline:
                    raise SynthesisWorkerError(
                        f"{describe_job(job)}: no result after {task_timeout_seconds:g} s, so its synthesis worker "
                        f"(pid {worker.process.pid}) was stopped; is a TTS engine stuck?")
    finally:
        _stop_workers(workers, busy=set(running))


def _worker_died(worker: _Worker, job: SpeakerJob | NoiseJob) -> SynthesisWorkerError:
    worker.process.join(5)
    code = worker.process.exitcode
    how = f"exit code {code}"
    if code is not None and code < 0:
        try:
            how = f"killed by {Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    return SynthesisWorkerError(f"{describe_job(job)}: its synthesis worker (pid {worker.process.pid}) died ({how}) "
                                "before finishing; SIGKILL is often the kernel's out-of-memory killer")


def _stop_workers(workers: list[_Worker], busy: set[_Worker]) -> None:
    """End every worker: idle ones leave when their pipe closes, busy (possibly stuck) ones are killed."""
    for worker in workers:
        worker.connection.close()
        if worker in busy:
            worker.process.kill()
    deadline = time.monotonic() + 5
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.process.close()
