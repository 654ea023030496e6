"""One DAG per workload, built from its definition (training/workloads/<name>/): validate_run, wait_for_raw_data
(an ``hdfs://`` data source must have landed; any other source passes at once), then the workload's steps in order,
each a Spark job or a command in the training environment, with check_shards (the shards' manifest is published)
right before train — with the workload's Params and assets. The two sensors are in cloudburst_hdfs.
A DAG file is this one call plus its documentation."""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, Asset, TaskGroup, chain, task
from cloudburst_hdfs import LandingZoneSensor, ManifestSensor
from cloudburst_operators import CloudburstCommandOperator, CloudburstSparkJobOperator, validate_run
from cloudburst_params import run_params

from training import workload_registry as workloads
from training.contract import SPARK_STEPS, TRAIN
from training.settings import STRATEGIES


def workload_dag(workload: str, doc_md: str | None = None, **dag_arguments: Any) -> DAG:
    """The pipeline DAG of ``workload`` (dag_id = the workload's name): validate_run → wait_for_raw_data → the
    workload's steps, with check_shards before train, its branch steps once per branch side by side (a task group
    each); ``dag_arguments`` override the defaults (manual trigger, one
    active run, one retry)."""
    definition = workloads.definition(workload)
    arguments: dict[str, Any] = {
        "dag_id": workload,
        "dag_display_name": definition.title,
        "description": definition.description,
        "doc_md": doc_md,
        # Paused at creation like every DAG: a user unpauses it to let the other workload's runs trigger it.
        "schedule": [Asset(name=name, uri=uri) for name, uri in [definition.scheduled_on]]
        if definition.scheduled_on else None,
        "start_date": datetime.datetime(2026, 1, 1),
        "catchup": False,
        "max_active_runs": 1,
        "params": run_params(workload),
        "default_args": {"retries": 1, "retry_delay": datetime.timedelta(seconds=15)},
        "tags": ["cloudburst", *definition.tags, *STRATEGIES],
        **dag_arguments,
    }
    with DAG(**arguments) as dag:

        @task(task_id="validate_run", retries=0)
        def validate(**context: Any) -> dict[str, Any]:
            return validate_run(workload, **context)

        steps: list[Any] = [LandingZoneSensor(workload=workload)]
        branched = [step for step in definition.steps if step in definition.branch_steps]
        for step in definition.steps:
            if step in definition.branch_steps:
                if step == branched[0]:  # the branches run side by side, each its steps in order
                    steps.append([branch_tasks(workload, branch, branched) for branch in definition.branches])
                continue
            if step == TRAIN:  # never train on a half-published dataset
                steps.append(ManifestSensor(workload=workload))
            steps.append(step_task(workload, step))
        for upstream, downstream in zip(steps, steps[1:], strict=False):  # chain() does not fan in and out
            upstream >> downstream
        validate() >> steps[0]
    return dag


def step_task(workload: str, step: str, branch: str = "") -> Any:
    """The task that runs one step (a Spark job or a command in the training environment)."""
    definition = workloads.definition(workload)
    outlets = [Asset(name=name, uri=uri) for name, uri in [definition.assets[step]]] \
        if step in definition.assets and not branch else []
    operator = CloudburstSparkJobOperator if step in SPARK_STEPS else CloudburstCommandOperator
    return operator(task_id=step, step=step, workload=workload, branch=branch, outlets=outlets)


def branch_tasks(workload: str, branch: str, branch_steps: list[str]) -> TaskGroup:
    """One branch's steps in order, in a task group named after it (``model_a.train``), with check_shards before
    train."""
    with TaskGroup(group_id=branch, tooltip=f"{workload}: the {branch} branch") as group:
        tasks: list[Any] = []
        for step in branch_steps:
            if step == TRAIN:
                tasks.append(ManifestSensor(workload=workload, branch=branch))
            tasks.append(step_task(workload, step, branch))
        chain(*tasks)
    return group
