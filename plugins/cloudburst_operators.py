"""Airflow operators that run Cloudburst's steps in the training environment.

Airflow and TensorFlow cannot share an environment (see infra/setup.sh), so every heavy step runs in the training
environment: Spark steps through the Spark provider's ``SparkSubmitOperator`` with that environment's
``spark-submit`` and Python, the others as a subprocess of its Python. Every step gets the same arguments — the
run specification's flags, rebuilt from the DAG run's Params — so each task's command line shows exactly what it
was asked to do; the step names come from training.contract, each step's job module from the workload's
definition (``WorkloadDefinition.job_module``).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from training import storage
from training import workload_registry as workloads
from training.config import RunSpec, RunSpecError, run_name_from, shard_rows
from training.contract import (
    EVALUATE,
    EVALUATION_FILE,
    IMAGE_SHARDS,
    REPO_ROOT,
    RUN_SPEC_FILE,
    WORKLOAD_OWNED_STEPS,
    job_path,
)
from training.jobs.spark_session import DRIVER_JAVA_OPTIONS, check_cluster_configuration


def training_python() -> Path:
    """The training environment's interpreter: $CLOUDBURST_TRAINING_PYTHON or the checkout's .venv/training."""
    return Path(os.environ.get("CLOUDBURST_TRAINING_PYTHON", REPO_ROOT / ".venv" / "training" / "bin" / "python"))


def training_environment() -> dict[str, str]:
    """Variables for processes in the training environment: its bin first on PATH (spark-submit), its Python for
    Spark's driver and workers, the driver JVM's options (spark-submit reads SPARK_SUBMIT_OPTS)."""
    python = training_python()
    return {
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", DRIVER_JAVA_OPTIONS),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


def run_spec(context: Any, workload: str, branch: str = "") -> RunSpec:
    """The run specification of this DAG run: its Params, the DAG's workload and a run name from the run id; for
    a run an asset event triggered, the event's ``uri`` in the workload's ``scheduled_on_setting`` (unless the
    Params set it); for a task of one of the workload's parallel branches, that branch's (its settings applied)."""
    values = {name: value for name, value in dict(context["params"]).items() if value is not None}
    if not values.get("run_name"):
        values["run_name"] = run_name_from(context["run_id"])
    definition = workloads.definition(workload)
    if definition.scheduled_on and not values.get(definition.scheduled_on_setting):
        published = triggering_uri(context, definition.scheduled_on)
        if published:
            values[definition.scheduled_on_setting] = published
    spec = RunSpec.from_json({**values, "workload": workload})  # Params are JSON: "3" is no integer
    return spec.for_branch(branch) if branch else spec


def triggering_uri(context: Any, asset: tuple[str, str]) -> str:
    """The ``uri`` the newest event of ``asset`` that triggered this DAG run carries (what the upstream run
    published); empty for a run no event of it triggered. Every task reads it from its own context, so all of a
    run's tasks agree."""
    name, uri = asset
    events = context.get("triggering_asset_events") or {}
    try:
        matching = list(events[Asset(name=name, uri=uri)])
    except KeyError:
        return ""
    if not matching:
        return ""
    newest = max(matching, key=lambda event: event.timestamp)
    published = (newest.extra or {}).get("uri")
    if not isinstance(published, str) or not published.strip():
        raise RunSpecError(f"this run was triggered by asset {name!r}, but its newest event carries no 'uri' "
                           f"(extra={newest.extra!r}): nothing to start from; trigger the DAG by hand instead")
    return published.strip()


def record_outlets(context: Any, outlets: Sequence[Any], uri: str) -> None:
    """Tell data-aware DAGs where this run's dataset is and which version it holds."""
    manifest = storage.read_manifest(uri) or {}
    for outlet in outlets:
        if isinstance(outlet, Asset):
            context["outlet_events"][outlet].extra = {"uri": uri, "data_version": manifest.get("data_version", "")}


def task_spec(context: Any, step: str, workload: str, branch: str, settings: dict[str, Any] | None) -> RunSpec:
    """The run specification a step task runs: its own complete run settings when it has them (a scaling study's
    configuration, mapped over), else the DAG run's (``run_spec``)."""
    if settings:
        spec = RunSpec.from_json(dict(settings))
        if step not in spec.definition.steps:  # the study DAG holds every workload's preparation steps
            raise AirflowSkipException(f"{spec.workload} has no {step} step")
        return spec
    return run_spec(context, workload, branch)


class CloudburstSparkJobOperator(SparkSubmitOperator):
    """A Spark step, submitted with the training environment's spark-submit: the file of the workload's job module
    for it (``WorkloadDefinition.job_module``: training/jobs/<step>.py, or the workload's own). ``settings``, a
    complete run mapping (templated, so a mapped task can take it from an XCom), replaces the DAG run's Params."""

    template_fields = (*SparkSubmitOperator.template_fields, "settings")

    def __init__(self, *, step: str, workload: str = "", branch: str = "", conn_id: str = "spark_default",
                 settings: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(
            # the run's workload decides at execute (a study's task learns it from its settings; a step only
            # workloads implement, such as features, has no file until then)
            application=str(workloads.definition(workload).job_file(step) if workload
                            else "" if step in WORKLOAD_OWNED_STEPS else job_path(step)),
            conn_id=conn_id,
            name=f"cloudburst-{step}",
            driver_memory=os.environ.get("CLOUDBURST_SPARK_DRIVER_MEMORY", "2g"),
            env_vars=training_environment(),
            verbose=False,
            **kwargs,
        )
        self.step = step
        self.workload = workload
        self.branch = branch
        self.settings = settings

    def execute(self, context: Any) -> str:
        spec = task_spec(context, self.step, self.workload, self.branch, self.settings)
        self.application = str(spec.definition.job_file(self.step))
        self.application_args = spec.to_args()
        self.spark_master = spec.spark_master
        self._hook = None  # built from this run's settings
        super().execute(context)
        record_outlets(context, self.outlets, spec.step_output(self.step))
        return spec.step_output(self.step)


    def _get_hook(self) -> Any:
        hook = super()._get_hook()
        if getattr(self, "spark_master", ""):
            # The run's spark_master setting wins over the connection's master (the provider has no argument for
            # it); empty leaves the connection in charge, which is how a deployment switches local ↔ YARN.
            hook._connection["master"] = self.spark_master
            hook._is_yarn = self.spark_master.startswith("yarn")
        self.log.info("Spark master: %s", hook._connection["master"])
        return hook


class CloudburstCommandOperator(BaseOperator):
    """A step that needs no Spark (ingestion, evaluation), run as ``python -m training.jobs.<step>`` with the
    training environment's Python; ``settings`` as for CloudburstSparkJobOperator."""

    template_fields = ("settings",)

    def __init__(self, *, step: str, workload: str = "", branch: str = "", settings: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.workload = workload
        self.branch = branch
        self.settings = settings

    def execute(self, context: Any) -> Any:
        spec = task_spec(context, self.step, self.workload, self.branch, self.settings)
        command = [str(training_python()), "-m", spec.definition.job_module(self.step), *spec.to_args()]
        self.log.info("running %s", " ".join(command))
        with subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, **training_environment()},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
            for line in process.stdout:
                self.log.info("%s", line.rstrip())
        if process.returncode != 0:
            raise RuntimeError(f"{self.step} failed with exit status {process.returncode}")
        record_outlets(context, self.outlets, spec.step_output(self.step))
        if self.step == EVALUATE:
            return finite_json(storage.read_json(storage.join(spec.run_uri(), EVALUATION_FILE)))
        return spec.step_output(self.step)


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None: XComs travel as strict JSON (a threshold may be
    infinite, a metric of an empty condition NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value


def validate_run(workload: str, **context: Any) -> dict[str, Any]:
    """Reject bad settings before any Spark job starts, naming the value and why."""
    spec = run_spec(context, workload).validate().validate_sources()
    check_cluster_configuration(spec.spark_master)
    if spec.existing_shards:
        manifest = storage.require_manifest(spec.existing_shards, IMAGE_SHARDS)
        spec.validate_shards(manifest["num_shards"], shard_rows(manifest))
    # caught here, not after ingest/augment/shard ran for nothing
    spec.refuse_other_run(storage.read_json(storage.join(spec.run_uri(), RUN_SPEC_FILE)))
    scheduled_on = spec.definition.scheduled_on
    if scheduled_on and triggering_uri(context, scheduled_on):
        setting = spec.definition.scheduled_on_setting
        print(f"triggered by asset {scheduled_on[0]}: {setting}={getattr(spec, setting)!r}", file=sys.stderr)
    print(f"run {spec.run_name}: {spec.total_workers} workers ({spec.config}), data under "
          f"{spec.resolved_data_root()}, MLflow at {spec.resolved_tracking_uri()}", file=sys.stderr)
    return spec.to_mapping()
