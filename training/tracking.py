"""MLflow tracking: one experiment per workload, one run per training run, shared names for everything.

Params are the run specification (plus ``total_workers`` and ``data_version``); per-epoch metrics use
step = epoch; speedup and scaling efficiency are computed against the newest one-worker run of the same
workload, data version and hyper-parameters, so the MLflow UI can chart them per configuration.

Several DAG runs may log into one local SQLite store at once: the schema is created under a file lock beside
the database, the database runs in WAL mode, and a write that still meets "database is locked" is retried.
For concurrent production use, point ``MLFLOW_TRACKING_URI`` at an MLflow server instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlparse

from training.config import REPO_ROOT, RunSpec, RunSpecError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from mlflow import MlflowClient

    from training.strategies.base import TrainingResult

log = logging.getLogger(__name__)

# MLflow 3's experiment-kind tag: records that an experiment is model training (MLflow's own clients and other UI
# versions read it). MLflow 3.17's UI does not choose its view by it: see UI_WORKFLOW_QUERY.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
SPEEDUP_WITHHELD_TAG = "speedup_withheld"  # why a run of several workers has no speedup metric
MODEL_TRAINING_KIND = "custom_model_development"

# Logged at step = epoch; a None value is an epoch not recorded (an earlier attempt's epoch, after a resume).
PER_EPOCH_METRICS = ("train_loss", "train_accuracy", "val_accuracy", "epoch_seconds", "samples_per_second")

# A baseline must match on these (besides workload and data_version) to be comparable.
BASELINE_KEYS = ("epochs", "batch_size_per_worker", "learning_rate", "warmup_epochs", "seed", "target_accuracy",
                 "evaluations_per_epoch")

# MLflow already waits 20 s for a SQLite lock per transaction; these retries cover what that cannot (a lock
# upgrade SQLite refuses at once to avoid a deadlock), a few times with growing, jittered pauses.
LOCKED_RETRIES = 8
LOCKED_FIRST_PAUSE_SECONDS = 0.05
LOCKED_LONGEST_PAUSE_SECONDS = 2.0

# MLflow 3.17's UI takes its view from a "workflow type", not from the experiment's kind tag: the URL's
# ``workflowType`` query, else the browser's last choice on the sidebar's GenAI / Model training switch (local
# storage ``mlflow.workflowType_v1``), else GenAI — Overview and Traces, with the assistant panel. This query opens an
# experiment's Runs table (child runs nested under their parent) in the Model training view.
UI_WORKFLOW_QUERY = "workflowType=machine_learning"
STUDY_ROLE_TAG = "cloudburst.study_role"  # training.study.report.ROLE_TAG ("study" on a study's parent run)
STUDY_NAME_TAG = "cloudburst.study"  # training.study.report.STUDY_TAG (the parent's and its children's)

T = TypeVar("T")


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (``sqlite:////abs/path`` is absolute), else None."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri[len("sqlite:///") :]).resolve()


def tracked_run(spec: RunSpec, run_id: str) -> Any:
    """The MLflow run a finished run directory says it was tracked as, from the run's store; refused in one line
    when that store does not hold it (tracking_uri changed, or the store was deleted while the data stayed)."""
    from mlflow.exceptions import MlflowException

    tracking_uri = spec.resolved_tracking_uri()
    try:
        return client(tracking_uri).get_run(run_id)
    except MlflowException:
        raise RunSpecError(f"run {spec.run_name} was tracked as MLflow run {run_id}, which {tracking_uri} does not "
                           f"hold: set tracking_uri to the store it was tracked in, or give the run another run_name "
                           f"(or delete {spec.run_uri()}) to train it again") from None


def client(tracking_uri: str) -> MlflowClient:
    """A client for the store; a local SQLite store is created (schema, WAL mode) by one process at a time."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    database = sqlite_path(tracking_uri)
    if database is None:
        return mlflow.MlflowClient(tracking_uri)
    database.parent.mkdir(parents=True, exist_ok=True)
    # MLflow's tracking store creates and migrates a new database's schema without a lock: concurrent first uses
    # fail ("table runs already exists", "duplicate column name: step"). It caches the store per process, so
    # only a process's first call does real work under this lock.
    with _exclusive_lock(database.with_name(database.name + ".lock")):
        mlflow_client = retry_when_locked(mlflow.MlflowClient, tracking_uri)
        retry_when_locked(_use_write_ahead_log, database)
    return mlflow_client


def retry_when_locked(operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``operation(*args, **kwargs)``, retried a bounded number of times while SQLite says the database is locked."""
    attempt = 0
    while True:
        try:
            return operation(*args, **kwargs)
        except Exception as error:
            if attempt == LOCKED_RETRIES or not _is_locked(error):
                raise
            # Jitter keeps processes that collided once from colliding again in step (timing only, not results).
            pause = min(LOCKED_FIRST_PAUSE_SECONDS * 2**attempt, LOCKED_LONGEST_PAUSE_SECONDS) * (0.5 + random.random())
            log.warning("MLflow store locked by another process (%s): retry %d of %d in %.2f s",
                        _first_line(error), attempt + 1, LOCKED_RETRIES, pause)
        time.sleep(pause)
        attempt += 1


def experiment_id(mlflow_client: MlflowClient, workload: str, tracking_uri: str) -> str:
    """The workload's experiment, marked as model training; for a local store its artifacts live under var/."""
    experiment = retry_when_locked(mlflow_client.get_experiment_by_name, workload)
    if experiment is None:
        artifact_location = None
        database = sqlite_path(tracking_uri)
        if database is not None:
            artifact_location = (database.parent / "artifacts" / workload).as_uri()
        elif not urlparse(tracking_uri).scheme.startswith("http"):
            artifact_location = (REPO_ROOT / "var" / "mlflow" / "artifacts" / workload).as_uri()
        try:
            return retry_when_locked(mlflow_client.create_experiment, workload, artifact_location=artifact_location,
                                     tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND})
        except Exception:  # another process created it between our look-up and create
            experiment = retry_when_locked(mlflow_client.get_experiment_by_name, workload)
            if experiment is None:
                raise
    if EXPERIMENT_KIND_TAG not in experiment.tags:  # created before Cloudburst set the kind
        retry_when_locked(mlflow_client.set_experiment_tag, experiment.experiment_id, EXPERIMENT_KIND_TAG,
                          MODEL_TRAINING_KIND)
    return experiment.experiment_id


def ui_runs_url(base_url: str, experiment: str, search_filter: str | None = None) -> str:
    """The MLflow UI's Runs table of ``experiment`` in its Model training view, filtered by ``search_filter`` or,
    without one, unfiltered: the UI would otherwise restore the browser's last search in that experiment."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment}/runs?{UI_WORKFLOW_QUERY}"
            f"&searchFilter={quote(search_filter or '', safe='')}")


def ui_run_url(base_url: str, experiment: str, run_id: str) -> str:
    """One run's page in the MLflow UI's Model training view."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}?{UI_WORKFLOW_QUERY}"


def ui_links(tracking_uri: str, base_url: str, studies_per_experiment: int = 3) -> list[str]:
    """Lines for a person opening the MLflow UI at ``base_url`` on this store: each experiment's Runs table (empty
    experiments but ours left out), and for the newest scaling studies their parent run and the table filtered to
    the study (the parent with its configurations' runs nested under it). Reads only; no lines without a store."""
    import mlflow
    from mlflow.entities import ViewType

    database = sqlite_path(tracking_uri)
    if database is not None and not database.exists():
        return []
    mlflow_client = mlflow.MlflowClient(tracking_uri)
    lines = []
    for experiment in retry_when_locked(mlflow_client.search_experiments, view_type=ViewType.ACTIVE_ONLY,
                                        order_by=["name ASC"]):
        ours = EXPERIMENT_KIND_TAG in experiment.tags
        if not ours and not retry_when_locked(mlflow_client.search_runs, [experiment.experiment_id], max_results=1):
            continue
        lines.append(f"{experiment.name}: {ui_runs_url(base_url, experiment.experiment_id)}")
        studies = retry_when_locked(mlflow_client.search_runs, [experiment.experiment_id],
                                    f"tags.`{STUDY_ROLE_TAG}` = 'study'", order_by=["attributes.start_time DESC"],
                                    max_results=studies_per_experiment)
        for study in studies:
            name = study.data.tags.get(STUDY_NAME_TAG, study.info.run_name)
            where = f"tags.`{STUDY_NAME_TAG}` = '{name}'"
            parent = ui_run_url(base_url, experiment.experiment_id, study.info.run_id)
            lines.append(f"  study {name}: parent run {parent}")
            lines.append(f"    with its runs nested under it (expand the parent's row): "
                         f"{ui_runs_url(base_url, experiment.experiment_id, where)}")
    return lines


def find_baseline(mlflow_client: MlflowClient, experiment: str, spec: RunSpec, data_version: str,
                  exclude_run_id: str | None = None) -> Any | None:
    """The newest finished one-worker run comparable with ``spec``, or None."""
    params = spec.mlflow_params()
    conditions = [f"params.workload = '{spec.workload}'", f"params.data_version = '{data_version}'",
                  "params.total_workers = '1'", "attributes.status = 'FINISHED'"]
    conditions += [f"params.{key} = '{params[key]}'" for key in BASELINE_KEYS]
    runs = retry_when_locked(mlflow_client.search_runs, [experiment], " and ".join(conditions),
                             order_by=["attributes.start_time DESC"], max_results=10)
    for run in runs:
        # A ceiling run (communication off) is no baseline, nor has one; runs older than the setting had it on.
        if run.info.run_id != exclude_run_id and "wall_seconds" in run.data.metrics \
                and run.data.params.get("communication", "true") == params["communication"]:
            return run
    return None


def speedup_withheld(baseline_metrics: dict[str, float], result: TrainingResult) -> str:
    """Why no speedup against this baseline is logged ("" when one is): it ran on a machine measurably faster or
    slower than this run's (training.machine_speed), or one of the two was not measured."""
    from training import machine_speed

    before, now = baseline_metrics.get("machine_gflops"), result.metrics.get("machine_gflops")
    if not before or not now:
        return "the machine's speed was not measured for this run or its baseline"
    if machine_speed.comparable(before, now):
        return ""
    return (f"the baseline trained while the machine did {before:.0f} GFLOP/s, this run {now:.0f} "
            f"({machine_speed.difference(before, now):.0%} apart, more than the "
            f"{machine_speed.COMPARABLE_WITHIN:.0%} allowed): run both side by side")


def speedup_metrics(baseline_metrics: dict[str, float], result: TrainingResult) -> dict[str, float]:
    """speedup = baseline wall ÷ this wall (and the same for time-to-target); efficiency = speedup ÷ workers."""
    metrics = {"speedup": baseline_metrics["wall_seconds"] / result.wall_seconds}
    metrics["scaling_efficiency"] = metrics["speedup"] / result.total_workers
    baseline_target = baseline_metrics.get("time_to_target_seconds")
    if baseline_target and result.time_to_target_seconds:
        metrics["time_to_target_speedup"] = baseline_target / result.time_to_target_seconds
    return metrics


def log_training(spec: RunSpec, result: TrainingResult, data_version: str, artifacts: dict[str, bytes],
                 run_id: str | None = None, started_at: float | None = None) -> str:
    """Create (or complete) the MLflow run of a training run; returns its id. ``started_at`` (Unix seconds) is
    when training started: the run's start in MLflow's run list, so its duration is the training's."""
    from mlflow.entities import Metric, Param, RunTag

    from training.evaluation.figures import learning_curves_figure, staleness_histogram_figure

    tracking_uri = spec.resolved_tracking_uri()
    mlflow_client = client(tracking_uri)
    experiment = experiment_id(mlflow_client, spec.workload, tracking_uri)
    if run_id is None:
        tags = {"workload": spec.workload, "strategy": spec.strategy, "config": spec.config,
                "nodes": str(spec.nodes), "workers_per_node": str(spec.workers_per_node),
                "total_workers": str(spec.total_workers), "cloudburst_run": spec.run_name}
        run = retry_when_locked(mlflow_client.create_run, experiment,
                                run_name=f"{spec.strategy}-{spec.config}-{spec.run_name}", tags=tags,
                                start_time=None if started_at is None else int(started_at * 1000))
        run_id = run.info.run_id
    existing = retry_when_locked(mlflow_client.get_run, run_id).data.params
    params = [Param(key, value) for key, value in {**spec.mlflow_params(), "data_version": data_version}.items()
              if key not in existing]
    now = int(time.time() * 1000)
    # The shared per-epoch metrics, and any a workload measures at epoch ends (Trainable.epoch_metrics).
    metrics = [Metric(name, float(value), now, int(row["epoch"]))
               for row in result.epochs for name, value in row.items()
               if name != "epoch" and value is not None and isinstance(value, int | float)]
    final = {"wall_seconds": result.wall_seconds, "training_seconds": result.training_seconds,
             "samples_per_second_mean": sum(r["samples_per_second"] for r in result.epochs) / len(result.epochs)}
    if result.time_to_target_seconds is not None:
        final["time_to_target_seconds"] = result.time_to_target_seconds
    if result.resumed_from_epoch:
        final["resumed_from_epoch"] = result.resumed_from_epoch
    tags = [RunTag(name, str(value).lower() if isinstance(value, bool) else str(value))
            for name, value in result.extra.items()  # strategy facts (threads, steps, ranks in sync), filterable
            if isinstance(value, str | int | float | bool)]
    baseline = find_baseline(mlflow_client, experiment, spec, data_version, exclude_run_id=run_id)
    if spec.total_workers == 1:
        final.update(speedup=1.0, scaling_efficiency=1.0)
    elif baseline is not None:
        tags.append(RunTag("baseline_run_id", baseline.info.run_id))
        withheld = speedup_withheld(baseline.data.metrics, result)
        if withheld:
            tags.append(RunTag(SPEEDUP_WITHHELD_TAG, withheld))
        else:
            final.update(speedup_metrics(baseline.data.metrics, result))
    metrics += [Metric(name, float(value), now, 0) for name, value in {**final, **result.metrics}.items()]
    # One call; MLflow's client splits it into its batch limits (1000 metrics, 100 params, 100 tags) itself.
    retry_when_locked(mlflow_client.log_batch, run_id, metrics=metrics, params=params, tags=tags)

    log_artifacts(mlflow_client, run_id, artifacts)
    retry_when_locked(mlflow_client.log_dict, run_id, result.to_mapping(), "training_result.json")
    figures = {"learning_curves.png": learning_curves_figure(
        result.epochs, result.evaluations, spec.target_accuracy,
        f"{spec.workload} · {spec.strategy} {spec.config} · batch {spec.batch_size_per_worker}/worker")}
    if result.extra.get("staleness_counts"):
        counts = {int(value): count for value, count in result.extra["staleness_counts"].items()}
        figures["staleness_histogram.png"] = staleness_histogram_figure(
            counts, f"{spec.strategy} {spec.config} · n_fetch {spec.n_fetch}, n_push {spec.n_push}, "
                    f"{spec.ps_shards} server shards")
    for name, figure in figures.items():
        log_figure(mlflow_client, run_id, figure, name)
    return run_id


def log_evaluation(spec: RunSpec, run_id: str, metrics: dict[str, float], artifacts: dict[str, bytes],
                   model: Any | None = None, example_inputs: Any | None = None,
                   training_finished_at: float | None = None) -> None:
    """Add test metrics, figures and the model (with its input/output signature) to the run; mark it finished,
    ending when its training did (``training_finished_at``, Unix seconds) so its MLflow duration is the
    training's."""
    from mlflow.entities import Metric

    mlflow_client = client(spec.resolved_tracking_uri())
    now = int(time.time() * 1000)
    retry_when_locked(mlflow_client.log_batch, run_id,
                      metrics=[Metric(name, float(value), now, 0) for name, value in metrics.items()])
    log_artifacts(mlflow_client, run_id, artifacts)
    if model is not None:
        log_model(run_id, model, example_inputs)
    end_time = None if training_finished_at is None else int(training_finished_at * 1000)
    retry_when_locked(mlflow_client.set_terminated, run_id, "FINISHED", end_time)


def log_model(run_id: str, model: Any, example_inputs: Any | None = None) -> None:
    """The model as the run's MLflow model ``model``: Cloudburst's own model directory (weights and how to rebuild
    them: training.models.model_files, which cannot carry code) under MLflow's python_function flavour, loaded by
    that module; its content id is the run's tag ``model_version``."""
    import mlflow

    from training.models import model_files

    with tempfile.TemporaryDirectory(prefix="cloudburst-mlflow-model-") as local, mlflow.start_run(run_id=run_id):
        directory = Path(local) / "model"
        manifest = model_files.save_model(str(directory), model)
        signature = None
        if example_inputs is not None:
            signature = mlflow.models.infer_signature(example_inputs, model(example_inputs).numpy())
        # Explicit requirements: inferring them would load the model again in a subprocess (slow).
        mlflow.pyfunc.log_model(name="model", loader_module=model_files.__name__, data_path=str(directory),
                                signature=signature, pip_requirements=["tensorflow-cpu==2.15.1", "numpy<2"])
        mlflow.set_tag("model_version", manifest["data_version"])


def log_artifacts(mlflow_client: MlflowClient, run_id: str, artifacts: dict[str, bytes]) -> None:
    """Each ``name: bytes`` as the run's artifact ``name``, byte for byte."""
    for name, content in artifacts.items():
        retry_when_locked(mlflow_client.log_stream, run_id, io.BytesIO(content), name)


def log_figure(mlflow_client: MlflowClient, run_id: str, figure: Figure, name: str) -> None:
    """The figure as the run's artifact ``name`` (PNG at the figures' resolution); closes the figure."""
    from training.evaluation.figures import DPI, close

    try:
        retry_when_locked(mlflow_client.log_figure, run_id, figure, name, save_kwargs={"dpi": DPI})
    finally:
        close(figure)


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created if missing) against other processes on this machine."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _use_write_ahead_log(database: Path) -> None:
    """WAL mode (kept in the file): readers no longer block the writer, nor the writer readers."""
    with contextlib.closing(sqlite3.connect(database, timeout=20)) as connection:
        if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            connection.execute("PRAGMA journal_mode=WAL")


def _is_locked(error: BaseException) -> bool:
    # MLflow wraps SQLAlchemy's OperationalError, which wraps sqlite3's; the message survives each layer.
    message = str(error)
    return "database is locked" in message or "database table is locked" in message


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def log_system_run(spec: RunSpec, run_name: str, metrics: dict[str, float], tags: dict[str, str],
                   artifacts: dict[str, bytes], params: dict[str, str] | None = None) -> str:
    """A finished MLflow run for a result built from other runs (speaker verification's fused system): the run
    specification's params plus ``params``, the shared tags plus ``tags``, metrics at step 0 and artifacts."""
    from mlflow.entities import Metric, Param

    tracking_uri = spec.resolved_tracking_uri()
    mlflow_client = client(tracking_uri)
    experiment = experiment_id(mlflow_client, spec.workload, tracking_uri)
    all_tags = {"workload": spec.workload, "strategy": spec.strategy, "config": spec.config,
                "nodes": str(spec.nodes), "workers_per_node": str(spec.workers_per_node),
                "total_workers": str(spec.total_workers), "cloudburst_run": spec.run_name, **tags}
    run = retry_when_locked(mlflow_client.create_run, experiment, run_name=run_name, tags=all_tags)
    run_id = run.info.run_id
    now = int(time.time() * 1000)
    retry_when_locked(mlflow_client.log_batch, run_id,
                      metrics=[Metric(name, float(value), now, 0) for name, value in metrics.items()],
                      params=[Param(key, value) for key, value in {**spec.mlflow_params(), **(params or {})}.items()])
    log_artifacts(mlflow_client, run_id, artifacts)
    retry_when_locked(mlflow_client.set_terminated, run_id, "FINISHED")
    return run_id
