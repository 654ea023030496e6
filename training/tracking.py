"""MLflow tracking: one experiment per workload, one run per training run, shared names for everything.

Params are the run specification (plus ``total_workers`` and ``data_version``); per-epoch metrics use
step = epoch; speedup and scaling efficiency are computed against the newest one-worker run of the same
workload, data version and hyper-parameters, so the MLflow UI can chart them per configuration.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from training.config import REPO_ROOT, RunSpec

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from training.strategies.base import TrainingResult

log = logging.getLogger(__name__)

# A baseline must match on these (besides workload and data_version) to be comparable.
BASELINE_KEYS = ("epochs", "batch_size_per_worker", "learning_rate", "warmup_epochs", "seed", "target_accuracy",
                 "evaluations_per_epoch")


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (``sqlite:////abs/path`` is absolute), else None."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri[len("sqlite:///") :]).resolve()


def client(tracking_uri: str) -> MlflowClient:
    import mlflow

    database = sqlite_path(tracking_uri)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri)
    return mlflow.MlflowClient(tracking_uri)


def experiment_id(mlflow_client: MlflowClient, workload: str, tracking_uri: str) -> str:
    """The workload's experiment; for a local store its artifacts live beside the database under var/."""
    experiment = mlflow_client.get_experiment_by_name(workload)
    if experiment is not None:
        return experiment.experiment_id
    artifact_location = None
    database = sqlite_path(tracking_uri)
    if database is not None:
        artifact_location = (database.parent / "artifacts" / workload).as_uri()
    elif not urlparse(tracking_uri).scheme.startswith("http"):
        artifact_location = (REPO_ROOT / "var" / "mlflow" / "artifacts" / workload).as_uri()
    try:
        return mlflow_client.create_experiment(workload, artifact_location=artifact_location)
    except Exception:  # another process created it between our look-up and create
        found = mlflow_client.get_experiment_by_name(workload)
        if found is None:
            raise
        return found.experiment_id


def find_baseline(mlflow_client: MlflowClient, experiment: str, spec: RunSpec, data_version: str,
                  exclude_run_id: str | None = None) -> Any | None:
    """The newest finished one-worker run comparable with ``spec``, or None."""
    params = spec.mlflow_params()
    conditions = [f"params.workload = '{spec.workload}'", f"params.data_version = '{data_version}'",
                  "params.total_workers = '1'", "attributes.status = 'FINISHED'"]
    conditions += [f"params.{key} = '{params[key]}'" for key in BASELINE_KEYS]
    runs = mlflow_client.search_runs([experiment], " and ".join(conditions), order_by=["attributes.start_time DESC"],
                                     max_results=10)
    for run in runs:
        if run.info.run_id != exclude_run_id and "wall_seconds" in run.data.metrics:
            return run
    return None


def speedup_metrics(baseline_metrics: dict[str, float], result: TrainingResult) -> dict[str, float]:
    """speedup = baseline wall ÷ this wall (and the same for time-to-target); efficiency = speedup ÷ workers."""
    metrics = {"speedup": baseline_metrics["wall_seconds"] / result.wall_seconds}
    metrics["scaling_efficiency"] = metrics["speedup"] / result.total_workers
    baseline_target = baseline_metrics.get("time_to_target_seconds")
    if baseline_target and result.time_to_target_seconds:
        metrics["time_to_target_speedup"] = baseline_target / result.time_to_target_seconds
    return metrics


def log_training(spec: RunSpec, result: TrainingResult, data_version: str, artifacts: dict[str, bytes],
                 run_id: str | None = None) -> str:
    """Create (or complete) the MLflow run of a training run; returns its id."""
    from training.evaluation.figures import learning_curves_png, staleness_histogram_png

    tracking_uri = spec.resolved_tracking_uri()
    mlflow_client = client(tracking_uri)
    experiment = experiment_id(mlflow_client, spec.workload, tracking_uri)
    tags = {"workload": spec.workload, "strategy": spec.strategy, "config": spec.config,
            "nodes": str(spec.nodes), "workers_per_node": str(spec.workers_per_node),
            "total_workers": str(spec.total_workers), "cloudburst_run": spec.run_name}
    if run_id is None:
        run = mlflow_client.create_run(experiment, run_name=f"{spec.strategy}-{spec.config}-{spec.run_name}",
                                       tags=tags)
        run_id = run.info.run_id
    params = {**spec.mlflow_params(), "data_version": data_version}
    existing = mlflow_client.get_run(run_id).data.params
    for key, value in params.items():
        if key not in existing:
            mlflow_client.log_param(run_id, key, value)
    for row in result.epochs:
        for name in ("train_loss", "train_accuracy", "val_accuracy", "epoch_seconds", "samples_per_second"):
            if row[name] is not None:  # None: not recorded (an earlier attempt's epoch, after a resume)
                mlflow_client.log_metric(run_id, name, row[name], step=int(row["epoch"]))
    final = {"wall_seconds": result.wall_seconds, "training_seconds": result.training_seconds,
             "samples_per_second_mean": sum(r["samples_per_second"] for r in result.epochs) / len(result.epochs)}
    if result.time_to_target_seconds is not None:
        final["time_to_target_seconds"] = result.time_to_target_seconds
    if result.resumed_from_epoch:
        final["resumed_from_epoch"] = result.resumed_from_epoch
    baseline = find_baseline(mlflow_client, experiment, spec, data_version, exclude_run_id=run_id)
    if spec.total_workers == 1:
        final.update(speedup=1.0, scaling_efficiency=1.0)
    elif baseline is not None:
        final.update(speedup_metrics(baseline.data.metrics, result))
        mlflow_client.set_tag(run_id, "baseline_run_id", baseline.info.run_id)
    for name, value in {**final, **result.metrics}.items():
        mlflow_client.log_metric(run_id, name, float(value))
    for name, value in result.extra.items():  # strategy facts (threads, steps, ranks in sync) as filterable tags
        if isinstance(value, str | int | float | bool):
            mlflow_client.set_tag(run_id, name, str(value).lower() if isinstance(value, bool) else str(value))
    figures = {"learning_curves.png": learning_curves_png(
        result.epochs, result.evaluations, spec.target_accuracy,
        f"{spec.workload} · {spec.strategy} {spec.config} · batch {spec.batch_size_per_worker}/worker")}
    if result.extra.get("staleness_counts"):
        counts = {int(value): count for value, count in result.extra["staleness_counts"].items()}
        figures["staleness_histogram.png"] = staleness_histogram_png(
            counts, f"{spec.strategy} {spec.config} · n_fetch {spec.n_fetch}, n_push {spec.n_push}, "
                    f"{spec.ps_shards} server shards")
    log_artifacts(mlflow_client, run_id, {**artifacts, **figures,
                                          "training_result.json": json.dumps(result.to_mapping(), indent=2).encode()})
    return run_id


def log_evaluation(spec: RunSpec, run_id: str, metrics: dict[str, float], artifacts: dict[str, bytes],
                   model: Any | None = None, example_inputs: Any | None = None) -> None:
    """Add test metrics, figures and the model (with its input/output signature) to the run; mark it finished."""
    import mlflow

    mlflow_client = client(spec.resolved_tracking_uri())
    for name, value in metrics.items():
        mlflow_client.log_metric(run_id, name, float(value))
    log_artifacts(mlflow_client, run_id, artifacts)
    if model is not None:
        with mlflow.start_run(run_id=run_id):
            # Explicit requirements: inferring them would load the model again in a subprocess (slow).
            signature = None
            if example_inputs is not None:
                signature = mlflow.models.infer_signature(example_inputs, model(example_inputs).numpy())
            mlflow.tensorflow.log_model(model, name="model", signature=signature,
                                        pip_requirements=["tensorflow-cpu==2.15.1"])
    mlflow_client.set_terminated(run_id, "FINISHED")


def log_artifacts(mlflow_client: MlflowClient, run_id: str, artifacts: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory(prefix="cloudburst-artifacts-") as directory:
        for name, content in artifacts.items():
            path = Path(directory) / name
            path.write_bytes(content)
            mlflow_client.log_artifact(run_id, str(path))
