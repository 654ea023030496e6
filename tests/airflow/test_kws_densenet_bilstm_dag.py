"""The kws_densenet_bilstm DAG: it loads, its form offers the speech settings, bad settings stop it early, and a
real run on a tiny synthetic corpus ends with the ingest report, the confusion matrix and the model in MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training import storage
from training.config import RunSpec, RunSpecError, run_name_from, workload_settings
from training.contract import RESULT_FILE
from training.speech.constants import FEATURE_KINDS
from training.workloads.kws_densenet_bilstm import KWS_TASKS

DAG_ID = "kws_densenet_bilstm"
PIPELINE = ["validate_run", "wait_for_raw_data", "ingest", "features", "shard", "check_shards", "train", "evaluate"]


@pytest.fixture(scope="module")
def dag(dag_bag):
    return dag_bag.dags[DAG_ID]


def test_the_dag_chains_the_speech_pipeline(dag):
    for upstream, downstream in zip(PIPELINE, PIPELINE[1:], strict=False):
        assert dag.get_task(upstream).downstream_task_ids == {downstream}
    spark_tasks = {task.task_id for task in dag.tasks if type(task).__name__ == "CloudburstSparkJobOperator"}
    assert spark_tasks == {"features", "shard", "train"}


def test_the_form_has_the_speech_settings_and_not_the_mnist_ones(dag):
    assert set(dag.params) == {entry.name for entry in workload_settings(DAG_ID) if entry.on_form}
    assert not {"alpha", "sigma", "train_limit", "test_limit"} & set(dag.params)
    assert dag.params.get_param("kws_task").schema["enum"] == list(KWS_TASKS)
    assert dag.params.get_param("features").schema["enum"] == list(FEATURE_KINDS)
    assert dag.params["data_source"] == "synthetic"
    for name in ("speakers", "kws_task", "features", "resample", "data_sha256", "held_out_families",
                 "online_augmentation"):
        param = dag.params.get_param(name)
        assert param.schema.get("title") and param.description, name
    # The form refuses what the setting refuses: its pattern is anchored as a whole, alternatives included.
    import re

    pattern = dag.params.get_param("online_augmentation").schema["pattern"]
    assert re.fullmatch(pattern, "speed,noise") and re.fullmatch(pattern, "none")
    assert not re.search(pattern, "none,reverb") and not re.search(pattern, "reverb,speed")


def context_for(**params):
    from cloudburst_params import run_params

    values = {name: param.value for name, param in run_params(DAG_ID).items()}
    return {"params": {**values, **params}, "run_id": "manual__2026-11-30T10:00:00+00:00"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kws_task": 20}, "kws_task=20"),
        ({"speakers": 0}, "speakers=0"),
        ({"features": "spectrogram"}, "features='spectrogram'"),
        ({"data_source": "/nonexistent/speech"}, "data_source='/nonexistent/speech': not 'synthetic'"),
        ({"data_sha256": "abc"}, "data_sha256='abc'"),
    ],
)
def test_bad_settings_are_rejected_before_any_work(params, message):
    from cloudburst_operators import validate_run

    with pytest.raises((RunSpecError, ValueError), match=message):
        validate_run(DAG_ID, **context_for(**params))


def unpause_in_database(dag_bag, dag_id: str) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    DagBundlesManager().sync_bundles_to_db()  # as dag.test() does first
    sync_bag_to_db(dag_bag, "dags-folder", None)
    with create_session() as session:
        session.get(DagModel, dag_id).is_paused = False


def check_the_model_triggers_speaker_verification(dag_run, run_directory: str, tmp_path, triggering_events) -> None:
    """The train task's asset event names the run directory; Airflow queues the speaker_verification DAG scheduled
    on it; a run it triggers validates with that directory as transfer_from (the training environment's own tests
    check what transfer_from accepts)."""
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from cloudburst_operators import validate_run
    from cloudburst_params import run_params
    from sqlalchemy import select

    with create_session() as session:
        event, asset = session.execute(
            select(AssetEvent, AssetModel).join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetEvent.source_run_id == dag_run.run_id, AssetModel.name == "kws_densenet_bilstm_model")).one()
        queued = session.scalars(select(AssetDagRunQueue.target_dag_id)
                                 .where(AssetDagRunQueue.asset_id == asset.id)).all()
        event_values = (asset.name, asset.uri, dict(event.extra), event.timestamp)
        session.get(DagModel, "speaker_verification").is_paused = True
    assert "speaker_verification" in queued
    assert event_values[2]["uri"] == run_directory
    assert storage.read_json(storage.join(run_directory, RESULT_FILE))["mlflow_run_id"]
    params = {name: param.value for name, param in run_params("speaker_verification").items()}
    context = {"params": {**params, "data_root": str(tmp_path / "data")},
               "run_id": "asset_triggered__2026-12-02T12:00:00+00:00",
               "triggering_asset_events": triggering_events(event_values)}
    assert validate_run("speaker_verification", **context)["transfer_from"] == run_directory


def test_a_real_run_on_a_tiny_synthetic_corpus(dag, dag_bag, tmp_path, triggering_events):
    import mlflow

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    conf = {"speakers": 24, "epochs": 2, "augment_copies": 1, "batch_size_per_worker": 32,
            "held_out_families": "rhvoice", "data_root": str(tmp_path / "data"), "tracking_uri": tracking_uri}
    unpause_in_database(dag_bag, "speaker_verification")  # scheduled on this DAG's model: it gets queued
    dag_run = dag.test(run_conf=conf)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {task_id: "success" for task_id in PIPELINE}, states
    spec = RunSpec.from_mapping({**conf, "workload": DAG_ID, "run_name": run_name_from(dag_run.run_id)})
    check_the_model_triggers_speaker_verification(dag_run, spec.run_uri(), tmp_path, triggering_events)

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(DAG_ID)
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    params, metrics = run.data.params, run.data.metrics
    assert (params["workload"], params["kws_task"], params["speakers"], params["features"]) == (
        DAG_ID, "12", "24", "log_mel")
    assert params["online_augmentation"] == "time_mask"  # the default, recorded with the run
    # Same metric names as the MNIST runs, per-class accuracy by class name, and the model size.
    assert {"test_accuracy", "wall_seconds", "samples_per_second_mean", "model_parameters"} <= set(metrics)
    assert {"test_accuracy_class_yes", "test_accuracy_class__silence_", "test_accuracy_class__unknown_"} <= set(
        metrics)
    assert 150_000 < metrics["model_parameters"] < 300_000
    artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"learning_curves.png", "confusion_matrix.png", "ingest_report.json", "per_class_accuracy.json"} <= (
        artifacts)
    assert client.search_logged_models([experiment.experiment_id]), "the model was not logged"
    # The logged accuracy is the confusion matrix's, over every held-out clip, labelled with the task's classes.
    confusion = json.loads(Path(client.download_artifacts(run.info.run_id, "confusion_matrix.json", str(tmp_path)))
                           .read_text())
    counts = np.array(confusion["counts"])
    assert confusion["class_names"][:3] == ["_silence_", "_unknown_", "yes"] and counts.shape == (12, 12)
    spec = RunSpec(workload=DAG_ID, speakers=24, augment_copies=1, held_out_families="rhvoice",
                   data_root=str(tmp_path / "data"))
    splits = storage.require_manifest(spec.augmented_uri())["splits"]
    assert counts.sum() == splits["test"]["rows"] > 0
    assert metrics["test_accuracy"] == pytest.approx(np.trace(counts) / counts.sum())
    # Voice families: the held-out engine's speakers are only in test, and accuracy is logged per family and over
    # the held-out and the trained families; false accepts over every non-keyword clip of the test speakers, words
    # never trained on (open set, also per family) and words trained on as _unknown_ (closed set) apart.
    clips = storage.require_manifest(spec.raw_uri())
    assert clips["held_out_families"] == ["rhvoice"]
    assert not any(family.startswith("rhvoice/") for split in ("train", "validation")
                   for family in clips["splits"][split]["families"])
    assert any(family.startswith("rhvoice/") for family in clips["splits"]["test"]["families"])
    assert {"test_accuracy_held_out_families", "test_accuracy_training_families", "open_set_false_accept_rate",
            "closed_set_false_accept_rate", "open_set_false_accepts_yes", "closed_set_false_accepts_yes"} <= set(
        metrics)
    assert {f"test_accuracy_family_{family}" for family in clips["splits"]["test"]["families"]} <= set(metrics)
    assert 0.0 <= metrics["open_set_false_accept_rate"] <= 1.0 and 0.0 <= metrics["closed_set_false_accept_rate"] <= 1
    report = json.loads(Path(client.download_artifacts(run.info.run_id, "keyword_evaluation.json", str(tmp_path)))
                        .read_text())
    assert report["closed_set_false_accepts"]["clips"] == splits["test_non_keywords"]["rows"] > 0
    assert report["open_set_false_accepts"]["clips"] == splits["test_open_set"]["rows"] > 0
    open_set_families = report["open_set_false_accepts"]["by_family"]
    assert open_set_families and set(open_set_families) <= set(clips["splits"]["test"]["families"])
    assert {f"open_set_false_accept_rate_family_{family}" for family in open_set_families} <= set(metrics)
    assert sum(row["clips"] for row in report["accuracy_by_family"].values()) == (
        counts.sum() - counts[0].sum())  # every test clip but silence belongs to a family
    # The keyword threshold: chosen on the validation speakers' open-set clips for the default 5 % target, held
    # there, and the test figures at it beside argmax's (a threshold only turns keywords into _unknown_).
    threshold = report["keyword_threshold"]
    assert threshold["chosen_on"] == "validation" and threshold["target"] == 0.05
    assert splits["validation_open_set"]["rows"] > 0 and "keyword_threshold.png" in artifacts
    assert threshold["validation_open_set_false_accept_rate_at_threshold"] <= 0.05
    assert metrics["keyword_threshold"] == pytest.approx(threshold["keyword_threshold"])
    assert metrics["open_set_false_accept_rate_at_threshold"] <= metrics["open_set_false_accept_rate"]
    assert metrics["closed_set_false_accept_rate_at_threshold"] <= metrics["closed_set_false_accept_rate"]
    curve = threshold["validation_curve"]["threshold"]
    assert curve[0] == 0.0 and curve[-1] == 1.0 and curve == sorted(curve)
