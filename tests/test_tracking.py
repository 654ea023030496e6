"""MLflow tracking against a real SQLite store: params, metrics, tags, artifacts, and speedup from a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import tracking
from training.config import RunSpec
from training.evaluation.classification import accuracy, confusion_matrix, per_class_accuracy
from training.strategies.base import TrainingResult


def fake_result(workers: int, wall_seconds: float, time_to_target: float | None,
                machine_gflops: float | None = 100.0) -> TrainingResult:
    """Numbers as a strategy (and the train job's machine measure) would report them (no training needed to test
    bookkeeping)."""
    epochs = [{"epoch": e, "train_loss": 1.0 / e, "train_accuracy": 0.9 + e / 100, "val_accuracy": 0.95 + e / 100,
               "epoch_seconds": wall_seconds / 3, "samples_per_second": 1000.0 * workers} for e in (1, 2)]
    evaluations = [{"train_seconds": 1.0 * i, "epoch": i / 2, "val_accuracy": 0.9 + i / 100} for i in range(1, 5)]
    return TrainingResult(epochs=epochs, evaluations=evaluations, wall_seconds=wall_seconds,
                          training_seconds=wall_seconds * 0.8, time_to_target_seconds=time_to_target,
                          model_uri="file:///nowhere/model", total_workers=workers,
                          extra={"ranks_in_sync": True, "threads_per_worker": 1},
                          metrics={} if machine_gflops is None else {"machine_gflops": machine_gflops})


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def store(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


# The shared names of docs/STYLE.md that are params; dashboards filter and chart on them.
SHARED_PARAMS = {"workload", "strategy", "nodes", "workers_per_node", "total_workers", "batch_size_per_worker",
                 "learning_rate", "epochs", "augment_copies", "data_version", "seed", "target_accuracy", "n_fetch",
                 "n_push", "ps_shards", "server_optimizer", "fp16_compression", "backward_passes_per_step"}


def finish(spec: RunSpec, run_id: str) -> None:
    tracking.log_evaluation(spec, run_id, {"test_accuracy": 0.99}, {})


def test_a_run_records_the_spec_as_params_epochs_as_steps_and_config_tags(store):
    spec = RunSpec(workers_per_node=2, tracking_uri=store, run_name="two")
    run_id = tracking.log_training(spec, fake_result(2, 30.0, 20.0), "abc123", {"shard_manifest.json": b"{}"})
    run = tracking.client(store).get_run(run_id)
    assert set(run.data.params) == set(spec.mlflow_params()) | {"data_version"}
    assert SHARED_PARAMS <= set(run.data.params)
    assert set(run.data.metrics) == set(tracking.PER_EPOCH_METRICS) | {
        "wall_seconds", "training_seconds", "samples_per_second_mean", "time_to_target_seconds", "machine_gflops"}
    assert {name: value for name, value in run.data.tags.items() if not name.startswith("mlflow.")} == {
        "workload": "mnist_elastic_cnn", "strategy": "horovod", "config": "1x2", "nodes": "1",
        "workers_per_node": "2", "total_workers": "2", "cloudburst_run": "two", "ranks_in_sync": "true",
        "threads_per_worker": "1"}
    assert run.data.tags["mlflow.runName"] == "horovod-1x2-two"
    assert run.data.params["workers_per_node"] == "2"
    assert run.data.params["total_workers"] == "2"
    assert run.data.params["data_version"] == "abc123"
    assert run.data.tags["config"] == "1x2"
    assert run.data.tags["strategy"] == "horovod"
    assert run.data.tags["ranks_in_sync"] == "true"
    history = tracking.client(store).get_metric_history(run_id, "val_accuracy")
    assert [(m.step, round(m.value, 4)) for m in history] == [(1, 0.96), (2, 0.97)]
    assert run.data.metrics["time_to_target_seconds"] == 20.0
    assert "speedup" not in run.data.metrics  # no baseline yet
    artifacts = {item.path for item in tracking.client(store).list_artifacts(run_id)}
    database_folder = tracking.sqlite_path(store).parent
    assert run.info.artifact_uri.startswith((database_folder / "artifacts").as_uri())
    assert artifacts == {"shard_manifest.json", "learning_curves.png", "training_result.json"}


def test_speedup_and_efficiency_come_from_the_newest_comparable_one_worker_run(store):
    baseline_spec = RunSpec(workers_per_node=1, tracking_uri=store, run_name="one")
    baseline = tracking.log_training(baseline_spec, fake_result(1, 60.0, 40.0), "abc123", {})
    finish(baseline_spec, baseline)
    other_data = RunSpec(workers_per_node=1, tracking_uri=store, run_name="one-other-data")
    finish(other_data, tracking.log_training(other_data, fake_result(1, 10.0, 5.0), "zzz999", {}))

    spec = RunSpec(workers_per_node=2, tracking_uri=store, run_name="two")
    run_id = tracking.log_training(spec, fake_result(2, 40.0, 16.0), "abc123", {})
    run = tracking.client(store).get_run(run_id)
    assert run.data.metrics["speedup"] == pytest.approx(1.5)
    assert run.data.metrics["scaling_efficiency"] == pytest.approx(0.75)
    assert run.data.metrics["time_to_target_speedup"] == pytest.approx(2.5)
    assert run.data.tags["baseline_run_id"] == baseline
    assert tracking.client(store).get_run(baseline).data.metrics["speedup"] == 1.0


@pytest.mark.parametrize(("baseline_gflops", "reason"), [
    (70.0, "the baseline trained while the machine did 70 GFLOP/s, this run 100 (30% apart"),
    (None, "the machine's speed was not measured"),
])
def test_a_speedup_over_a_baseline_on_a_faster_or_slower_machine_is_withheld_with_the_reason(store, baseline_gflops,
                                                                                              reason):
    baseline_spec = RunSpec(workers_per_node=1, tracking_uri=store, run_name="one")
    baseline = tracking.log_training(baseline_spec, fake_result(1, 60.0, 40.0, baseline_gflops), "abc123", {})
    finish(baseline_spec, baseline)
    spec = RunSpec(workers_per_node=2, tracking_uri=store, run_name="two")
    run = tracking.client(store).get_run(tracking.log_training(spec, fake_result(2, 40.0, 16.0), "abc123", {}))
    assert "speedup" not in run.data.metrics and "scaling_efficiency" not in run.data.metrics
    assert reason in run.data.tags[tracking.SPEEDUP_WITHHELD_TAG]
    assert run.data.tags["baseline_run_id"] == baseline
    close = RunSpec(workers_per_node=2, tracking_uri=store, run_name="three")  # within 15 %: a ratio
    run = tracking.client(store).get_run(tracking.log_training(close, fake_result(2, 40.0, 16.0, 75.0 if
                                                                                  baseline_gflops else None),
                                                               "abc123", {}))
    assert ("speedup" in run.data.metrics) == (baseline_gflops is not None)


def test_a_runs_mlflow_start_and_end_are_its_trainings(store):
    spec = RunSpec(workers_per_node=1, tracking_uri=store, run_name="timed")
    run_id = tracking.log_training(spec, fake_result(1, 300.0, None), "abc123", {}, started_at=1_000_000.25)
    tracking.log_evaluation(spec, run_id, {"test_accuracy": 0.99}, {}, training_finished_at=1_000_300.5)
    info = tracking.client(store).get_run(run_id).info
    assert (info.start_time, info.end_time, info.status) == (1_000_000_250, 1_000_300_500, "FINISHED")


def test_a_baseline_with_other_hyper_parameters_is_not_used(store):
    baseline_spec = RunSpec(workers_per_node=1, batch_size_per_worker=64, tracking_uri=store, run_name="one")
    finish(baseline_spec, tracking.log_training(baseline_spec, fake_result(1, 60.0, 40.0), "abc123", {}))
    spec = RunSpec(workers_per_node=2, batch_size_per_worker=128, tracking_uri=store, run_name="two")
    run = tracking.client(store).get_run(tracking.log_training(spec, fake_result(2, 40.0, 16.0), "abc123", {}))
    assert "speedup" not in run.data.metrics


def test_artifacts_keep_their_names_and_bytes_and_figures_are_pngs(store, tmp_path):
    spec = RunSpec(workers_per_node=2, tracking_uri=store, run_name="two")
    result = fake_result(2, 30.0, 20.0)
    result.extra["staleness_counts"] = {"0": 5, "1": 3}
    manifest = b'{\n  "shards": 2\n}'
    run_id = tracking.log_training(spec, result, "abc123", {"shard_manifest.json": manifest})
    tracking.log_evaluation(spec, run_id, {"test_accuracy": 0.99, "test_accuracy_class_0": 0.98},
                            {"confusion_matrix.png": PNG_MAGIC + b"rest", "per_class_accuracy.json": b'{"0": 0.98}'})
    mlflow_client = tracking.client(store)
    folder = Path(mlflow_client.download_artifacts(run_id, "", str(tmp_path / "downloaded")))
    assert {path.name for path in folder.iterdir()} == {
        "shard_manifest.json", "training_result.json", "learning_curves.png", "staleness_histogram.png",
        "confusion_matrix.png", "per_class_accuracy.json"}
    assert (folder / "shard_manifest.json").read_bytes() == manifest
    assert (folder / "confusion_matrix.png").read_bytes() == PNG_MAGIC + b"rest"
    assert (folder / "training_result.json").read_text() == json.dumps(result.to_mapping(), indent=2)
    assert (folder / "learning_curves.png").read_bytes().startswith(PNG_MAGIC)
    assert (folder / "staleness_histogram.png").read_bytes().startswith(PNG_MAGIC)
    run = mlflow_client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert {"test_accuracy", "test_accuracy_class_0"} <= set(run.data.metrics)


def test_more_metric_points_than_one_mlflow_batch_holds_are_all_logged(store):
    epochs = 250  # 5 per-epoch metrics: 1250 points, over MLflow's 1000 per batch
    result = fake_result(1, 60.0, None)
    result.epochs = [{**result.epochs[0], "epoch": epoch, "val_accuracy": epoch / 1000}
                     for epoch in range(1, epochs + 1)]
    spec = RunSpec(workers_per_node=1, epochs=epochs, tracking_uri=store, run_name="long")
    run_id = tracking.log_training(spec, result, "abc123", {})
    mlflow_client = tracking.client(store)
    for name in tracking.PER_EPOCH_METRICS:
        assert len(mlflow_client.get_metric_history(run_id, name)) == epochs, name
    assert mlflow_client.get_run(run_id).data.metrics["val_accuracy"] == pytest.approx(0.25)  # the last step's


def test_experiments_are_marked_as_model_training_when_created_and_when_found_unmarked(store, tmp_path):
    import mlflow

    unmarked = mlflow.MlflowClient(store).create_experiment(  # as made before Cloudburst set the kind
        "kws_densenet_bilstm", artifact_location=(tmp_path / "old-artifacts").as_uri())
    for workload in ("mnist_elastic_cnn", "kws_densenet_bilstm"):
        spec = RunSpec(workload=workload, workers_per_node=1, tracking_uri=store, run_name="one")
        tracking.log_training(spec, fake_result(1, 60.0, None), "abc123", {})
        experiment = tracking.client(store).get_experiment_by_name(workload)
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert tracking.client(store).get_experiment_by_name("kws_densenet_bilstm").experiment_id == unmarked


def test_ui_links_open_each_experiments_runs_in_the_model_training_view_and_a_study_with_its_nested_runs(store):
    from training.study import report

    assert (tracking.STUDY_ROLE_TAG, tracking.STUDY_NAME_TAG) == (report.ROLE_TAG, report.STUDY_TAG)
    assert tracking.ui_links(store, "http://ui") == []  # no store yet: nothing to open, and none created
    spec = RunSpec(workers_per_node=1, tracking_uri=store, run_name="one")
    child = tracking.log_training(spec, fake_result(1, 60.0, None), "abc123", {})
    mlflow_client = tracking.client(store)
    experiment = mlflow_client.get_experiment_by_name(spec.workload).experiment_id
    parent = mlflow_client.create_run(experiment, run_name="study-s1",
                                      tags={report.STUDY_TAG: "s1", report.ROLE_TAG: "study"}).info.run_id
    mlflow_client.set_tag(child, report.PARENT_TAG, parent)
    runs = f"http://ui/#/experiments/{experiment}/runs?workflowType=machine_learning&searchFilter="
    assert tracking.ui_links(store, "http://ui/") == [  # "Default", empty and not ours, is left out
        f"mnist_elastic_cnn: {runs}",
        f"  study s1: parent run http://ui/#/experiments/{experiment}/runs/{parent}?workflowType=machine_learning",
        f"    with its runs nested under it (expand the parent's row): {runs}"
        "tags.%60cloudburst.study%60%20%3D%20%27s1%27"]


def test_a_locked_database_is_retried_a_bounded_number_of_times(monkeypatch):
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

    pauses: list[float] = []
    monkeypatch.setattr(tracking.time, "sleep", pauses.append)
    calls = []

    def locked_twice() -> str:
        calls.append(1)
        if len(calls) <= 2:  # as MLflow's SQLAlchemy store reports it
            raise MlflowException("(sqlite3.OperationalError) database is locked", TEMPORARILY_UNAVAILABLE)
        return "done"

    assert tracking.retry_when_locked(locked_twice) == "done"
    assert len(pauses) == 2 and pauses[0] < pauses[1] * 2

    def always_locked() -> None:
        raise MlflowException("(sqlite3.OperationalError) database is locked", TEMPORARILY_UNAVAILABLE)

    with pytest.raises(MlflowException, match="database is locked"):
        tracking.retry_when_locked(always_locked)
    assert len(pauses) == 2 + tracking.LOCKED_RETRIES
    assert max(pauses) <= tracking.LOCKED_LONGEST_PAUSE_SECONDS * 1.5

    def other_error() -> None:
        calls.append(1)
        raise MlflowException("(sqlite3.OperationalError) no such table: runs")

    calls.clear()
    with pytest.raises(MlflowException, match="no such table"):
        tracking.retry_when_locked(other_error)
    assert len(calls) == 1


def test_confusion_matrix_accuracy_and_per_class_accuracy_on_known_values():
    labels = [0, 0, 1, 1, 1, 2]
    predictions = [0, 1, 1, 1, 0, 2]
    confusion = confusion_matrix(labels, predictions, num_classes=4)
    assert confusion[:3, :3].tolist() == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert accuracy(confusion) == pytest.approx(4 / 6)
    per_class = per_class_accuracy(confusion)
    assert per_class[:3].tolist() == pytest.approx([0.5, 2 / 3, 1.0])
    assert per_class[3] != per_class[3]  # NaN: class 3 has no examples
