"""MLflow tracking against a real SQLite store: params, metrics, tags, artifacts, and speedup from a baseline."""

from __future__ import annotations

import pytest

from training import tracking
from training.config import RunSpec
from training.evaluation.classification import accuracy, confusion_matrix, per_class_accuracy
from training.strategies.base import TrainingResult


def fake_result(workers: int, wall_seconds: float, time_to_target: float | None) -> TrainingResult:
    """Numbers as a strategy would report them (no training needed to test bookkeeping)."""
    epochs = [{"epoch": e, "train_loss": 1.0 / e, "train_accuracy": 0.9 + e / 100, "val_accuracy": 0.95 + e / 100,
               "epoch_seconds": wall_seconds / 3, "samples_per_second": 1000.0 * workers} for e in (1, 2)]
    evaluations = [{"train_seconds": 1.0 * i, "epoch": i / 2, "val_accuracy": 0.9 + i / 100} for i in range(1, 5)]
    return TrainingResult(epochs=epochs, evaluations=evaluations, wall_seconds=wall_seconds,
                          training_seconds=wall_seconds * 0.8, time_to_target_seconds=time_to_target,
                          model_uri="file:///nowhere/model.h5", total_workers=workers,
                          extra={"ranks_in_sync": True, "threads_per_worker": 1})


@pytest.fixture
def store(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def finish(spec: RunSpec, run_id: str) -> None:
    tracking.log_evaluation(spec, run_id, {"test_accuracy": 0.99}, {})


def test_a_run_records_the_spec_as_params_epochs_as_steps_and_config_tags(store):
    spec = RunSpec(workers_per_node=2, tracking_uri=store, run_name="two")
    run_id = tracking.log_training(spec, fake_result(2, 30.0, 20.0), "abc123", {"shard_manifest.json": b"{}"})
    run = tracking.client(store).get_run(run_id)
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
    assert {"shard_manifest.json", "learning_curves.png", "training_result.json"} <= artifacts


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


def test_a_baseline_with_other_hyper_parameters_is_not_used(store):
    baseline_spec = RunSpec(workers_per_node=1, batch_size_per_worker=64, tracking_uri=store, run_name="one")
    finish(baseline_spec, tracking.log_training(baseline_spec, fake_result(1, 60.0, 40.0), "abc123", {}))
    spec = RunSpec(workers_per_node=2, batch_size_per_worker=128, tracking_uri=store, run_name="two")
    run = tracking.client(store).get_run(tracking.log_training(spec, fake_result(2, 40.0, 16.0), "abc123", {}))
    assert "speedup" not in run.data.metrics


def test_confusion_matrix_accuracy_and_per_class_accuracy_on_known_values():
    labels = [0, 0, 1, 1, 1, 2]
    predictions = [0, 1, 1, 1, 0, 2]
    confusion = confusion_matrix(labels, predictions, num_classes=4)
    assert confusion[:3, :3].tolist() == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert accuracy(confusion) == pytest.approx(4 / 6)
    per_class = per_class_accuracy(confusion)
    assert per_class[:3].tolist() == pytest.approx([0.5, 2 / 3, 1.0])
    assert per_class[3] != per_class[3]  # NaN: class 3 has no examples
