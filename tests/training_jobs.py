"""Running the training job as a user would (``python -m training.jobs.train``), killing it mid-run, and retrying."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from training.config import RunSpec
from training.strategies.checkpoints import CheckpointStore


def train_command(spec: RunSpec) -> list[str]:
    return [sys.executable, "-m", "training.jobs.train", *spec.to_args()]


def job_environment() -> dict[str, str]:
    return {**os.environ, "CLOUDBURST_SPARK_UI": "false"}


def kill_job_after_first_checkpoint(spec: RunSpec, deadline_seconds: float = 240) -> int:
    """Start the training job, SIGKILL its whole process group (driver, Spark, workers: a node dying mid-run) as
    soon as it wrote its first checkpoint; returns the epochs the newest checkpoint holds."""
    checkpoints = CheckpointStore(spec.run_uri())
    job = subprocess.Popen(train_command(spec), env=job_environment(), start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + deadline_seconds
        while checkpoints.latest_epoch() < 1 and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checkpoints.latest_epoch() >= 1, "no checkpoint written before the deadline"
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    killed_after = checkpoints.latest_epoch()
    assert killed_after < spec.epochs, "the job finished before it could be killed; make epochs longer"
    return killed_after


def retry_job(spec: RunSpec, timeout_seconds: float = 600) -> subprocess.CompletedProcess:
    """Run the same job again to the end; fails the test with the job's output if it fails."""
    retry = subprocess.run(train_command(spec), env=job_environment(), capture_output=True, text=True,
                           timeout=timeout_seconds)
    assert retry.returncode == 0, retry.stderr[-3000:]
    return retry
