"""The scaling_study DAG: one DAG run is one study of one workload over a grid of configurations.

plan (check every setting, expand the grid, refuse it over budget, open the MLflow parent run) → the workload's
preparation steps once (a step the workload does not have is skipped) → shard, one mapped task per distinct shard
set → train, one mapped task per configuration (baseline, ceilings, runs) → evaluate, mapped the same way →
report (nest the runs under the parent, table, figures, recommendation, champion model). Every heavy task takes
the one slot of the ``cloudburst_cluster`` pool, so configurations never share the cluster's cores: each
measures alone, and gang-scheduled runs (all ranks at once) can never wait for each other's ranks."""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from airflow.sdk import DAG, Param, task
from cloudburst_operators import CloudburstCommandOperator, CloudburstSparkJobOperator

from training.config import RunSpec, run_name_from
from training.contract import AUGMENT, EVALUATE, FEATURES, INGEST, SHARD, TRAIN
from training.jobs.spark_session import check_cluster_configuration
from training.study.plan import DEFAULT_RUN_SETTINGS, STUDY_NAME_MAX_LENGTH, STUDY_SETTINGS, plan_study

STUDY_POOL = "cloudburst_cluster"
STUDY_POOL_SLOTS = 1
PREPARATION_STEPS = (INGEST, AUGMENT, FEATURES)  # every workload's; each runs only for a workload that has it
# Mapped tasks' names in the Grid view (Jinja, rendered with the task's own expanded settings).
RUN_NAME = "{{ task.settings['run_name'] }}"
SHARD_SET_NAME = "shards for {{ task.settings['nodes'] * task.settings['workers_per_node'] }} worker(s)"


def default_study_name(run_id: str) -> str:
    """A study's name when the Params give none: its DAG run's date and time (20261202-184843), else the run id
    made safe for run names, short enough for every configuration's run name."""
    found = re.search(r"(\d{4})-(\d{2})-(\d{2})T(\d{2})[:-](\d{2})[:-](\d{2})", run_id)
    return "{}{}{}-{}{}{}".format(*found.groups()) if found else run_name_from(run_id, STUDY_NAME_MAX_LENGTH)


def ensure_study_pool() -> None:
    """The pool every study's heavy tasks queue in (Airflow's scheduler leaves a task of a missing pool waiting);
    run against the metadata database by infra/airflow-services.sh and infra/study.sh."""
    from airflow.models.pool import Pool

    Pool.create_or_update_pool(STUDY_POOL, STUDY_POOL_SLOTS, "Cloudburst scaling studies: one configuration at a "
                               "time on the cluster, so each measures alone", include_deferred=False)


def study_params() -> dict[str, Param]:
    """A Param per study setting (from its declaration); run_settings: any run setting but those the grid owns;
    variants: overrides every run is repeated with."""
    params = {entry.name: Param(entry.default if not entry.optional else "", **entry.json_schema(entry.default))
              for entry in STUDY_SETTINGS}
    params["run_settings"] = Param(
        DEFAULT_RUN_SETTINGS, type="object", title="Run settings",
        description="Settings every configuration shares, as JSON: any run setting (`cloudburst settings "
                    "--workload …` lists them) except those the grid decides, e.g. {\"epochs\": 3, \"train_limit\": "
                    "10000, \"spark_master\": \"yarn\", \"data_root\": \"hdfs://…\"}.", section="Study")
    params["variants"] = Param(
        [], type="array", items={"type": "object"}, title="Variants",
        description="Optional: a list of run-setting overrides; every run of the grid is repeated with each (the "
                    "baseline and ceilings are not), e.g. [{}, {\"server_optimizer\": \"adam\", "
                    "\"server_learning_rate\": 0.001}, {\"staleness_aware\": true}].", section="Study")
    return params


def scaling_study_dag(doc_md: str | None = None) -> DAG:
    with DAG(dag_id="scaling_study", dag_display_name="Scaling study", doc_md=doc_md,
             description="Speedup, efficiency and time-to-target over a grid of strategies and cluster shapes",
             schedule=None, start_date=datetime.datetime(2026, 1, 1), catchup=False, max_active_runs=1,
             params=study_params(), default_args={"retries": 1, "retry_delay": datetime.timedelta(seconds=15)},
             tags=["cloudburst", "study"]) as dag:

        @task(task_id="plan", retries=0, multiple_outputs=True)
        def plan(**context: Any) -> dict[str, Any]:
            values = {name: value for name, value in dict(context["params"]).items() if value is not None}
            study = plan_study(values, study_name=default_study_name(context["run_id"]))
            base = RunSpec.from_mapping(study.base)
            check_cluster_configuration(base.spark_master)
            if study.grid["link_rates"]:
                from training.jobs.cluster_links import require_cluster

                require_cluster()
            from training.study import record

            parent_run_id = record.open_study(study, base.resolved_tracking_uri())
            print(f"study {study.name}: {len(study.configurations)} runs, estimated {study.estimate_minutes:g} min; "
                  f"MLflow parent run {parent_run_id}")
            for configuration in study.configurations:
                print(f"  {configuration.role:8} {configuration.label}")
            mapping = study.to_mapping()
            return {"parent_run_id": parent_run_id, "tracking_uri": base.resolved_tracking_uri(),
                    "prepare": mapping["prepare"], "shards": mapping["shards"], "runs": mapping["runs"],
                    "started": time.time()}

        # Airflow maps only over a task's return value, not over one key of several outputs: one small task each.
        @task(task_id="shard_sets", retries=0)
        def shard_sets(shards: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return shards

        @task(task_id="configurations", retries=0)
        def configurations(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return runs

        planned = plan()
        preparation = [
            (CloudburstSparkJobOperator if step != INGEST else CloudburstCommandOperator)(
                task_id=step, step=step, settings=planned["prepare"], pool=STUDY_POOL,
                trigger_rule="none_failed")
            for step in PREPARATION_STEPS]
        # The Grid view names each mapped box by its configuration instead of a bare map index.
        shards = CloudburstSparkJobOperator.partial(
            task_id=SHARD, step=SHARD, pool=STUDY_POOL, trigger_rule="none_failed",
            map_index_template=SHARD_SET_NAME).expand(settings=shard_sets(planned["shards"]))
        runs = configurations(planned["runs"])
        trained = CloudburstSparkJobOperator.partial(task_id=TRAIN, step=TRAIN, pool=STUDY_POOL,
                                                     map_index_template=RUN_NAME).expand(settings=runs)
        evaluated = CloudburstCommandOperator.partial(task_id=EVALUATE, step=EVALUATE, pool=STUDY_POOL,
                                                      trigger_rule="all_done",
                                                      map_index_template=RUN_NAME).expand(settings=runs)

        @task(task_id="report", retries=0, trigger_rule="all_done")
        def report(parent_run_id: str, tracking_uri: str, started: float) -> dict[str, Any]:
            from training.study import record
            from training.study.report import ceiling_verdict, table_text

            rows, advice = record.close_study(parent_run_id, tracking_uri, started)
            print(table_text(rows))
            print(f"ceiling check: {ceiling_verdict(rows)}")
            print(f"recommended ({advice.goal}): {advice.reason}")
            return {"parent_run_id": parent_run_id, "recommended": advice.chosen.label if advice.chosen else None,
                    "reason": advice.reason}

        chain_steps = [*preparation, shards, trained, evaluated]  # plan is upstream of all: they read its XComs
        for upstream, downstream in zip(chain_steps, chain_steps[1:], strict=False):
            upstream >> downstream
        evaluated >> report(planned["parent_run_id"], planned["tracking_uri"], planned["started"])
    return dag
