"""One DAG per workload, built from its definition (training/workloads/<name>/): validate_run, wait_for_raw_data
(an ``hdfs://`` data source must have landed; any other source passes at once), then the workload's steps in order,
each a Spark job or a command in the training environment, with check_shards (the shards' manifest is published)
right before train — with the workload's Params and assets. The two sensors are in cloudburst_hdfs.
A DAG file is this one call plus its documentation."""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, Asset, chain, task
from cloudburst_hdfs import LandingZoneSensor, ManifestSensor
from cloudburst_operators import CloudburstCommandOperator, CloudburstSparkJobOperator, validate_run
from cloudburst_params import run_params

from training import workloads
from training.contract import SPARK_STEPS, TRAIN
from training.settings import STRATEGIES


def workload_dag(workload: str, doc_md: str | None = None, **dag_arguments: Any) -> DAG:
    """The pipeline DAG of ``workload`` (dag_id = the workload's name): validate_run → wait_for_raw_data → the
    workload's steps, with check_shards before train; ``dag_arguments`` override the defaults (manual trigger, one
    active run, one retry)."""
    definition = workloads.definition(workload)
    arguments: dict[str, Any] = {
        "dag_id": workload,
        "dag_display_name": definition.title,
        "description": definition.description,
        "doc_md": doc_md,
        "schedule": None,
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
        for step in definition.steps:
            if step == TRAIN:  # never train on a half-published dataset
                steps.append(ManifestSensor(workload=workload))
            outlets = [Asset(name=name, uri=uri) for name, uri in [definition.assets[step]]] \
                if step in definition.assets else []
            operator = CloudburstSparkJobOperator if step in SPARK_STEPS else CloudburstCommandOperator
            steps.append(operator(task_id=step, step=step, workload=workload, outlets=outlets))
        chain(validate(), *steps)
    return dag
