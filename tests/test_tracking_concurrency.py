"""Concurrent DAG runs sharing one MLflow SQLite store: separate processes, racing on a fresh database.

Each process logs a full training run (params, 20 epochs of metrics, tags, artifacts, a model-free evaluation)
through training.tracking's public functions, as two DAG runs per workload would. Run as a script, this file is
one such process: ``python tests/test_tracking_concurrency.py STORE WORKLOAD RUN_NAME START_FILE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("mnist_elastic_cnn", "kws_densenet_bilstm")
PROCESSES_PER_WORKLOAD = 2
EPOCHS = 20
PER_EPOCH_METRICS = ("train_loss", "train_accuracy", "val_accuracy", "epoch_seconds", "samples_per_second")
TIMEOUT_SECONDS = 100
MLFLOW_SQLITE_BUSY_TIMEOUT_SECONDS = 20  # the PRAGMA busy_timeout MLflow's SQLAlchemy store sets per session


def log_one_run(store: str, workload: str, run_name: str) -> str:
    """What training and evaluation of one DAG run log; every artifact names the run that wrote it."""
    from training import tracking
    from training.config import RunSpec
    from training.strategies.base import TrainingResult

    spec = RunSpec(workload=workload, workers_per_node=2, epochs=EPOCHS, tracking_uri=store, run_name=run_name)
    epochs = [{"epoch": e, "train_loss": 1.0 / e, "train_accuracy": 0.5 + e / 100, "val_accuracy": 0.5 + e / 50,
               "epoch_seconds": 3.0, "samples_per_second": 1000.0} for e in range(1, EPOCHS + 1)]
    evaluations = [{"train_seconds": 3.0 * e, "epoch": e, "val_accuracy": 0.5 + e / 50} for e in range(1, EPOCHS + 1)]
    result = TrainingResult(epochs=epochs, evaluations=evaluations, wall_seconds=60.0, training_seconds=55.0,
                            time_to_target_seconds=None, model_uri=f"file:///nowhere/{run_name}.h5",
                            total_workers=2, extra={"ranks_in_sync": True, "threads_per_worker": 1})
    owner = json.dumps({"run_name": run_name}).encode()
    run_id = tracking.log_training(spec, result, "abc123", {"shard_manifest.json": owner, "run_spec.json": owner})
    tracking.log_evaluation(spec, run_id, {"test_accuracy": 0.9, "test_accuracy_class_0": 0.8},
                            {"confusion_matrix.json": owner, "per_class_accuracy.json": owner})
    return run_id


def main(store: str, workload: str, run_name: str, start_file: str) -> None:
    # Imported before the start signal, so the processes reach the fresh store within milliseconds of each other.
    import matplotlib.pyplot  # noqa: F401
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401

    import training.evaluation.figures  # noqa: F401
    import training.tracking  # noqa: F401

    Path(f"{start_file}.{run_name}.ready").touch()
    while not Path(start_file).exists():
        time.sleep(0.01)
    started = time.monotonic()
    run_id = log_one_run(store, workload, run_name)
    print(json.dumps({"run_id": run_id, "seconds": time.monotonic() - started}), flush=True)


def test_concurrent_runs_on_a_fresh_sqlite_store_all_finish_with_their_own_metrics_and_artifacts(tmp_path):
    from training import tracking

    store = f"sqlite:///{tmp_path / 'var' / 'mlflow' / 'mlflow.db'}"
    start_file = tmp_path / "start"
    names = {f"{workload}-{i}": workload for workload in WORKLOADS for i in range(PROCESSES_PER_WORKLOAD)}
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = {name: subprocess.Popen([sys.executable, __file__, store, workload, name, str(start_file)],
                                        cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
                 for name, workload in names.items()}
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while not all(Path(f"{start_file}.{name}.ready").exists() for name in names):
            assert time.monotonic() < deadline, "the logging processes did not start in time"
            assert all(process.poll() is None for process in processes.values()), _outputs(processes)
            time.sleep(0.05)
        started = time.monotonic()
        start_file.touch()
        outputs = {name: process.communicate(timeout=max(1.0, deadline - time.monotonic()))
                   for name, process in processes.items()}
        elapsed = time.monotonic() - started
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    failed = {name: stderr[-3000:] for name, (_, stderr) in outputs.items() if processes[name].returncode}
    assert not failed, failed
    print(f"{len(names)} concurrent runs logged in {elapsed:.1f} s: "
          + ", ".join(f"{name} {json.loads(out)['seconds']:.1f} s" for name, (out, _) in outputs.items()))

    mlflow_client = tracking.client(store)
    for workload in WORKLOADS:
        experiment = mlflow_client.get_experiment_by_name(workload)
        assert experiment.tags[tracking.EXPERIMENT_KIND_TAG] == tracking.MODEL_TRAINING_KIND
    run_ids = {name: json.loads(out)["run_id"] for name, (out, _) in outputs.items()}
    assert len(set(run_ids.values())) == len(names)
    for name, run_id in run_ids.items():
        run = mlflow_client.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert run.info.experiment_id == mlflow_client.get_experiment_by_name(names[name]).experiment_id
        assert run.data.tags["cloudburst_run"] == name
        assert run.data.params["epochs"] == str(EPOCHS)
        assert {"wall_seconds", "test_accuracy", "speedup"} - set(run.data.metrics) == {"speedup"}
        for metric in PER_EPOCH_METRICS:
            steps = [m.step for m in mlflow_client.get_metric_history(run_id, metric)]
            assert sorted(steps) == list(range(1, EPOCHS + 1)), (name, metric)
        assert run.info.artifact_uri.endswith(f"/{run_id}/artifacts")
        artifacts = {item.path for item in mlflow_client.list_artifacts(run_id)}
        assert artifacts == {"shard_manifest.json", "run_spec.json", "learning_curves.png", "training_result.json",
                             "confusion_matrix.json", "per_class_accuracy.json"}
        for artifact in ("shard_manifest.json", "confusion_matrix.json"):
            path = mlflow_client.download_artifacts(run_id, artifact, str(tmp_path / run_id))
            assert json.loads(Path(path).read_text()) == {"run_name": name}


def test_a_write_waiting_longer_than_mlflows_busy_timeout_is_retried_until_the_database_frees(tmp_path):
    """Another writer (a backup, ``mlflow gc``, a migration) holds the store past MLflow's 20 s SQLite wait."""
    from training import tracking

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.client(store)
    holding = threading.Event()

    def hold_the_write_lock() -> None:
        with contextlib.closing(sqlite3.connect(tmp_path / "mlflow.db", isolation_level=None)) as connection:
            connection.execute("BEGIN IMMEDIATE")
            holding.set()
            time.sleep(MLFLOW_SQLITE_BUSY_TIMEOUT_SECONDS + 2)
            connection.execute("COMMIT")

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    try:
        assert holding.wait(timeout=10)
        started = time.monotonic()
        run_id = log_one_run(store, "mnist_elastic_cnn", "patient")
        waited = time.monotonic() - started
    finally:
        holder.join(timeout=60)
    assert waited > MLFLOW_SQLITE_BUSY_TIMEOUT_SECONDS  # MLflow alone would have failed: "database is locked"
    assert tracking.client(store).get_run(run_id).info.status == "FINISHED"


def test_an_experiment_another_process_creates_between_look_up_and_create_is_used(tmp_path, monkeypatch):
    import mlflow

    from training import tracking

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_client = tracking.client(store)
    look_up = mlflow_client.get_experiment_by_name
    theirs = []

    def look_up_just_before_the_other_process_creates(name: str):
        found = look_up(name)
        if not theirs:  # the other process wins the race right after our first look-up
            theirs.append(mlflow.MlflowClient(store).create_experiment(
                name, artifact_location=(tmp_path / "theirs").as_uri(),
                tags={tracking.EXPERIMENT_KIND_TAG: tracking.MODEL_TRAINING_KIND}))
        return found

    monkeypatch.setattr(mlflow_client, "get_experiment_by_name", look_up_just_before_the_other_process_creates)
    assert tracking.experiment_id(mlflow_client, "mnist_elastic_cnn", store) == theirs[0]


def _outputs(processes: dict[str, subprocess.Popen]) -> str:
    for process in processes.values():
        if process.poll() is None:
            process.kill()
    return "\n".join(f"{name}: {process.communicate(timeout=10)[1][-3000:]}" for name, process in processes.items())


if __name__ == "__main__":
    main(*sys.argv[1:])
