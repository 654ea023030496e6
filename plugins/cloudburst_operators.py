"""Airflow operators that run Cloudburst's steps in the training environment.

Airflow and TensorFlow cannot share an environment (see infra/setup.sh), so every heavy step runs in the training
environment: Spark steps through the Spark provider's ``SparkSubmitOperator`` with that environment's
``spark-submit`` and Python, the others as a subprocess of its Python. The run specification is rebuilt from the
DAG run's Params in every task, so each task's command line shows exactly what it was asked to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, BaseOperator

from training import storage
from training.config import REPO_ROOT, RunSpec, run_name_from


def training_python() -> Path:
    """The training environment's interpreter: $CLOUDBURST_TRAINING_PYTHON or the checkout's .venv/training."""
    return Path(os.environ.get("CLOUDBURST_TRAINING_PYTHON", REPO_ROOT / ".venv" / "training" / "bin" / "python"))


def training_environment() -> dict[str, str]:
    """Variables for processes in the training environment: its bin first on PATH (spark-submit), its Python for
    Spark's driver and workers."""
    python = training_python()
    return {
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


def run_spec(context: Any, workload: str) -> RunSpec:
    """The run specification of this DAG run: its Params, the DAG's workload and a run name from the run id."""
    params = dict(context["params"])
    known = {name for name in RunSpec.__dataclass_fields__}
    values = {name: value for name, value in params.items() if name in known and value is not None}
    if not values.get("run_name"):
        values["run_name"] = run_name_from(context["run_id"])
    return RunSpec.from_mapping({**values, "workload": workload})


def step_arguments(step: str, spec: RunSpec) -> list[str]:
    """The command-line arguments of one pipeline step, derived from the run specification alone."""
    if step == "ingest" and spec.is_speech:
        arguments = ["--source", spec.resolved_data_source(), "--dest", spec.raw_uri(), "--speakers",
                     str(spec.speakers), "--task", str(spec.kws_task), "--seed", str(spec.seed),
                     "--data-root", spec.resolved_data_root()]
        if spec.data_sha256:
            arguments += ["--sha256", spec.data_sha256]
        return arguments + (["--resample"] if spec.resample else [])
    if step == "ingest":
        return ["--source", spec.resolved_data_source(), "--dest", spec.raw_uri(),
                "--train-limit", str(spec.train_limit), "--test-limit", str(spec.test_limit)]
    if step == "features":
        return ["--source", spec.raw_uri(), "--dest", spec.augmented_uri(), "--features", spec.features,
                "--copies", str(spec.augment_copies), "--seed", str(spec.seed)]
    if step == "augment":
        return ["--source", spec.raw_uri(), "--dest", spec.augmented_uri(), "--copies", str(spec.augment_copies),
                "--alpha", str(spec.alpha), "--sigma", str(spec.sigma), "--seed", str(spec.seed)]
    if step == "shard":
        return ["--source", spec.augmented_uri(), "--dest", spec.shards_uri(), "--shards",
                str(spec.total_workers), "--seed", str(spec.seed)]
    if step in ("train", "evaluate"):
        return spec.to_args()
    raise ValueError(f"unknown step {step!r}")


def step_output(step: str, spec: RunSpec) -> str:
    return {"ingest": spec.raw_uri(), "augment": spec.augmented_uri(), "features": spec.augmented_uri(),
            "shard": spec.shards_uri(), "train": spec.run_uri(), "evaluate": spec.run_uri()}[step]


def record_outlets(context: Any, outlets: Sequence[Any], uri: str) -> None:
    """Tell data-aware DAGs where this run's dataset is and which version it holds."""
    manifest = storage.read_manifest(uri) or {}
    for outlet in outlets:
        if isinstance(outlet, Asset):
            context["outlet_events"][outlet].extra = {"uri": uri, "data_version": manifest.get("data_version", "")}


class CloudburstSparkJobOperator(SparkSubmitOperator):
    """A ``training/jobs/<step>.py`` Spark job, submitted with the training environment's spark-submit."""

    def __init__(self, *, step: str, workload: str, conn_id: str = "spark_default", **kwargs: Any) -> None:
        super().__init__(
            application=str(REPO_ROOT / "training" / "jobs" / f"{step}.py"),
            conn_id=conn_id,
            name=f"cloudburst-{step}",
            driver_memory=os.environ.get("CLOUDBURST_SPARK_DRIVER_MEMORY", "2g"),
            env_vars=training_environment(),
            verbose=False,
            **kwargs,
        )
        self.step = step
        self.workload = workload

    def execute(self, context: Any) -> str:
        spec = run_spec(context, self.workload)
        if self.step == "shard" and spec.existing_shards:
            self.log.info("training on existing shards %s: nothing to shard", spec.existing_shards)
            return spec.existing_shards
        self.application_args = step_arguments(self.step, spec)
        super().execute(context)
        record_outlets(context, self.outlets, step_output(self.step, spec))
        return step_output(self.step, spec)


class CloudburstCommandOperator(BaseOperator):
    """A step that needs no Spark (ingestion or synthesis, evaluation), run with the training environment's
    Python."""

    MODULES = {"ingest": ["-m", "training.cli", "ingest", "mnist"], "evaluate": ["-m", "training.jobs.evaluate"]}
    SPEECH_MODULES = {**MODULES, "ingest": ["-m", "training.cli", "ingest", "speech"]}

    def __init__(self, *, step: str, workload: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.workload = workload

    def execute(self, context: Any) -> Any:
        spec = run_spec(context, self.workload)
        modules = self.SPEECH_MODULES if spec.is_speech else self.MODULES
        command = [str(training_python()), *modules[self.step], *step_arguments(self.step, spec)]
        self.log.info("running %s", " ".join(command))
        with subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, **training_environment()},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
            for line in process.stdout:
                self.log.info("%s", line.rstrip())
        if process.returncode != 0:
            raise RuntimeError(f"{self.step} failed with exit status {process.returncode}")
        record_outlets(context, self.outlets, step_output(self.step, spec))
        if self.step == "evaluate":
            return storage.read_json(storage.join(spec.run_uri(), "evaluation.json"))
        return step_output(self.step, spec)


def validate_run(workload: str, **context: Any) -> dict[str, Any]:
    """Reject bad settings before any Spark job starts, naming the value and why."""
    spec = run_spec(context, workload).validate().validate_sources()
    if spec.existing_shards:
        manifest = storage.require_manifest(spec.existing_shards, "image-shards")
        spec.validate_shards(manifest["num_shards"])
    print(f"run {spec.run_name}: {spec.total_workers} workers ({spec.config}), data under "
          f"{spec.resolved_data_root()}, MLflow at {spec.resolved_tracking_uri()}", file=sys.stderr)
    return spec.to_mapping()
