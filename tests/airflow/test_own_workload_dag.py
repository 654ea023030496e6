"""A user's own workload through Airflow (examples/csv_classifier/): installed with pip, its DAG file found through a
DAG bundle of its own, it runs as `airflow dags test` with a conf, and the scaling study offers and plans it.

Each Airflow process here sees the user's setup, not the test session's: its environment adds the example's
bundle and the installed package and drops $CLOUDBURST_WORKLOADS, so the entry point alone registers the workload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from example_workload import EXAMPLE, REPO_ROOT, install_example, user_environment

RUN_TIMEOUT_S = 600
PIPELINE = ["validate_run", "wait_for_raw_data", "ingest", "shard", "check_shards", "train", "evaluate"]


@pytest.fixture(scope="module")
def airflow_environment(tmp_path_factory) -> dict[str, str]:
    site = install_example(tmp_path_factory.mktemp("csv-classifier"))
    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(REPO_ROOT / "dags")}},
        {"name": "csv-classifier", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(EXAMPLE / "dags")}},
    ]
    return {**user_environment(site), "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles)}


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_the_example_dag_runs_from_its_own_bundle(airflow_environment, tmp_path):
    import mlflow
    from airflow.models import DagRun

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    conf = {"strategy": "downpour", "data_root": str(tmp_path / "data"), "tracking_uri": tracking_uri,
            "epochs": 2, "hidden_units": 16}
    airflow = str(Path(sys.executable).parent / "airflow")
    done = subprocess.run([airflow, "dags", "test", "csv_classifier", "-c", json.dumps(conf)],
                          env=airflow_environment, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    [dag_run] = DagRun.find(dag_id="csv_classifier")
    assert dag_run.state == "success", output[-4000:]
    assert {ti.task_id: ti.state for ti in dag_run.get_task_instances()} == dict.fromkeys(PIPELINE, "success")

    client = mlflow.MlflowClient(tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name("csv_classifier").experiment_id])
    params = run.data.params
    assert (params["workload"], params["strategy"], params["epochs"], params["hidden_units"]) == (
        "csv_classifier", "downpour", "2", "16")
    assert params["label_column"] == "class" and params["data_source"] == ""  # the bundled sample
    assert run.data.metrics["test_accuracy"] > 0.5  # 36 test wines, the largest cultivar 40 % of them
    assert run.data.tags["config"] == "1x2"


# In the Airflow environment, as the scaling_study DAG's plan task runs it: the form's workload choices and a plan.
STUDY_CHECK = """
import json
from airflow.dag_processing.dagbag import DagBag
from training.study.plan import plan_study

bag = DagBag(dag_folder={dags!r})
assert bag.import_errors == {{}}, bag.import_errors
choices = bag.dags["scaling_study"].params.get_param("workload").schema["enum"]
study = plan_study({{"workload": "csv_classifier", "strategies": "horovod,averaging", "nodes": "1",
                    "workers_per_node": "1,2", "n_push": "4", "repetitions": 1,
                    "run_settings": {{"epochs": 1}}}}, study_name="wine")
print(json.dumps({{"choices": choices, "labels": [c.label for c in study.configurations],
                  "workloads": sorted({{c.settings["workload"] for c in study.configurations}}),
                  "estimate": study.estimate_minutes}}))
"""


def test_the_scaling_study_offers_and_plans_the_example(airflow_environment):
    done = subprocess.run([sys.executable, "-c", STUDY_CHECK.format(dags=str(REPO_ROOT / "dags"))],
                          env=airflow_environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    planned = json.loads(done.stdout.strip().splitlines()[-1])
    assert "csv_classifier" in planned["choices"]
    assert planned["workloads"] == ["csv_classifier"]
    assert planned["labels"] == ["baseline-1x1", "ceiling-horovod-1x2-t0", "ceiling-averaging-1x2-t0",
                                 "horovod-1x2-t0", "averaging-1x1-t0", "averaging-1x2-t0"]
