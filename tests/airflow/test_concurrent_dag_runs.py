"""Two whole DAG runs at once, one per workload, as two `airflow dags test` processes sharing the Airflow metadata
database, one MLflow store and one data root: both finish, each run holds only its own params, metrics and
artifacts, and no process saw "database is locked". `make test` runs it on SQLite files (the embedded default) and
again with Airflow and MLflow on PostgreSQL (CLOUDBURST_TEST_STORE=postgres, tests/airflow/conftest.py).

The second workload is the toy (tests/toy_workload/, its DAG in a second bundle): what is shared here is the stores,
not the workloads' code, and the keyword spotter's own DAG run is tested on its own (test_kws_densenet_bilstm_dag).
With the keyword spotter here this test took 390 s of `make test`, the longest of the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN_TIMEOUT_S = 1200
CLASSES = {"mnist_elastic_cnn": 10, "toy_dense": 3}


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_two_dag_runs_at_once_share_the_mlflow_store_and_the_data_root(tmp_path, mlflow_store_uri):
    import mlflow
    from airflow.models import DagRun

    tracking_uri = mlflow_store_uri
    shared = {"data_root": str(tmp_path / "data"), "tracking_uri": tracking_uri, "epochs": 1}
    confs = {
        "mnist_elastic_cnn": {**shared, "train_limit": 1000, "test_limit": 300, "strategy": "horovod"},
        "toy_dense": {**shared, "strategy": "averaging"},
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    # As `make demo` does (and a dag-processor in a deployment): the DAGs are serialised once before runs start.
    # Without it two first-ever `airflow dags test` both insert the DAGs' assets: UNIQUE constraint failed.
    subprocess.run([airflow, "dags", "reserialize"], check=True, capture_output=True, timeout=300)
    processes = {}
    for dag_id, conf in confs.items():
        log = (tmp_path / f"{dag_id}.log").open("wb")
        processes[dag_id] = subprocess.Popen([airflow, "dags", "test", dag_id, "-c", json.dumps(conf)],
                                             stdout=log, stderr=subprocess.STDOUT)
    try:
        for process in processes.values():
            process.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
    logs = {dag_id: (tmp_path / f"{dag_id}.log").read_text(errors="replace") for dag_id in confs}
    for dag_id, process in processes.items():
        assert process.returncode == 0, f"{dag_id}: exit {process.returncode}\n{logs[dag_id][-4000:]}"
        assert "database is locked" not in logs[dag_id], f"{dag_id}:\n{logs[dag_id][-4000:]}"
        [dag_run] = DagRun.find(dag_id=dag_id)
        assert dag_run.state == "success", f"{dag_id}: {dag_run.state}\n{logs[dag_id][-4000:]}"

    client = mlflow.MlflowClient(tracking_uri)
    for dag_id, conf in confs.items():
        experiment = client.get_experiment_by_name(dag_id)
        [run] = client.search_runs([experiment.experiment_id])
        assert run.info.status == "FINISHED"
        assert (run.data.params["workload"], run.data.params["strategy"]) == (dag_id, conf["strategy"])
        assert 0 < run.data.metrics["test_accuracy"] <= 1
        artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
        assert {"run_spec.json", "confusion_matrix.json", "confusion_matrix.png", "learning_curves.png"} <= artifacts
        # Each run's artifacts are its own: its settings, and a confusion matrix over its own classes.
        spec = json.loads(Path(client.download_artifacts(run.info.run_id, "run_spec.json", str(tmp_path / dag_id)))
                          .read_text())
        assert spec["workload"] == dag_id
        confusion = json.loads(Path(client.download_artifacts(run.info.run_id, "confusion_matrix.json",
                                                              str(tmp_path / dag_id))).read_text())
        assert len(confusion["class_names"]) == CLASSES[dag_id], confusion["class_names"]
