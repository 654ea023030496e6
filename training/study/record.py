"""A study in MLflow: a parent run opened with the plan before any configuration runs, and closed with the table,
the figures and the recommendation once they all finished; every configuration's own run is nested under it and
keeps its own params, metrics and artifacts. The recommended run's model becomes the workload's ``champion``."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from typing import Any

from training import tracking
from training.study import report, study_model
from training.study.plan import StudyPlan

PLAN_ARTIFACT = "study_plan.json"
CHAMPION_ALIAS = "champion"
CHAMPION_VERSION_TAG = "cloudburst.champion_version"
RECOMMENDATION_GOAL_TAG = "cloudburst.recommendation_goal"


@dataclass(frozen=True)
class StudyAdvice:
    """What ``cloudburst advise`` prints: the study's judged rows, the advice for the goal asked, and the model
    version the study registered for the goal it was closed with (None when it registered none)."""

    study_run_id: str
    workload: str
    rows: list[report.Row]
    advice: report.Advice
    champion_version: str | None
    champion_goal: str


def open_study(plan: StudyPlan, tracking_uri: str) -> str:
    """The study's parent run, its grid as params and its plan as an artifact; returns the run id."""
    from mlflow.entities import Param

    mlflow_client = tracking.client(tracking_uri)
    experiment = tracking.experiment_id(mlflow_client, plan.workload, tracking_uri)
    run = tracking.retry_when_locked(mlflow_client.create_run, experiment, run_name=f"study-{plan.name}",
                                     tags={report.STUDY_TAG: plan.name, report.ROLE_TAG: "study",
                                           "workload": plan.workload})
    params = [Param(f"study.{key}", ",".join(map(str, value)) if isinstance(value, list) else str(value))
              for key, value in plan.grid.items()]
    params += [Param("study.configurations", str(len(plan.configurations))),
               Param("study.estimate_minutes", str(plan.estimate_minutes))]
    tracking.retry_when_locked(mlflow_client.log_batch, run.info.run_id, params=params)
    tracking.retry_when_locked(mlflow_client.log_dict, run.info.run_id, plan.to_mapping(), PLAN_ARTIFACT)
    return run.info.run_id


def load_plan(mlflow_client: Any, parent_run_id: str) -> dict[str, Any]:
    import mlflow

    return mlflow.artifacts.load_dict(mlflow_client.get_run(parent_run_id).info.artifact_uri + "/" + PLAN_ARTIFACT)


def study_rows(mlflow_client: Any, parent_run_id: str) -> tuple[dict[str, Any], list[report.Row]]:
    """The plan and the judged rows of a study, read back from its MLflow runs."""
    plan = load_plan(mlflow_client, parent_run_id)
    experiment = mlflow_client.get_run(parent_run_id).info.experiment_id
    runs = report.child_runs(mlflow_client, experiment, plan["configurations"])
    return plan, report.judge(report.rows_from_runs(plan["configurations"], runs))


def close_study(parent_run_id: str, tracking_uri: str, started: float | None = None,
                goal: str = report.DEFAULT_GOAL) -> tuple[list[report.Row], report.Advice]:
    """Nest every configuration's run, then log the table (study.csv and an MLflow table), the figures, the
    recommendation (tag + markdown) and register the recommended model; the parent run ends FINISHED, or FAILED
    with the reason when the study cannot be reported honestly."""
    from mlflow.entities import Metric, RunTag

    mlflow_client = tracking.client(tracking_uri)
    plan = load_plan(mlflow_client, parent_run_id)
    experiment = mlflow_client.get_run(parent_run_id).info.experiment_id
    try:
        runs = report.child_runs(mlflow_client, experiment, plan["configurations"])
        report.nest(mlflow_client, parent_run_id, plan["name"], plan["configurations"], runs)
        rows = report.judge(report.rows_from_runs(plan["configurations"], runs))
    except report.StudyError as error:
        mlflow_client.set_tag(parent_run_id, "cloudburst.study_error", str(error))
        mlflow_client.set_terminated(parent_run_id, "FAILED")
        raise
    log_table(mlflow_client, parent_run_id, rows)
    title = f"{plan['workload']} · study {plan['name']}"
    figures = {"speedup_and_efficiency.png": report.speedup_figure(rows, title),
               "time_to_target.png": report.time_to_target_figure(rows, title),
               "workers_per_node.png": report.workers_per_node_figure(rows, title)}
    by_link = report.throughput_by_link_figure(rows, title)
    if by_link is not None:  # a study with link profiles (namespace cluster)
        figures["throughput_by_link_rate.png"] = by_link
    model = study_model.fit_study(rows)  # the cost model from this study's own runs, checked leaving one out
    if model.constants is not None:
        figures["cost_model_extrapolation.png"] = study_model.study_extrapolation_figure(model, f"study {plan['name']}")
        mlflow_client.log_text(parent_run_id, study_model.predictions_csv(model), "cost_model_leave_one_out.csv")
        mlflow_client.log_text(parent_run_id, study_model.extrapolation_csv(model), "cost_model_extrapolation.csv")
    for name, figure in figures.items():
        tracking.log_figure(mlflow_client, parent_run_id, figure, name)
    advice = report.advise(rows, goal)
    mlflow_client.log_text(parent_run_id, report.advice_markdown(plan["name"], rows, advice) + "\n"
                           + study_model.markdown(model), "recommendation.md")
    tags = [RunTag(report.RECOMMENDATION_TAG, advice.chosen.label if advice.chosen else "none"),
            RunTag("cloudburst.ceiling_check", report.ceiling_verdict(rows)),
            RunTag("cloudburst.recommendation_reason", advice.reason[:5000]),
            RunTag(RECOMMENDATION_GOAL_TAG, goal),
            RunTag("cloudburst.cost_model", model.note[:5000])]
    metrics = []
    now = int(time.time() * 1000)
    if model.median_error is not None:
        metrics.append(Metric("cost_model_median_error", model.median_error, now, 0))
    if started is not None:
        metrics.append(Metric("study_minutes", (time.time() - started) / 60, now, 0))
    for row in rows:
        if row.speedup is not None and row.role == report.RUN:
            metrics.append(Metric(f"speedup.{row.label}", row.speedup, now, 0))
    mlflow_client.log_batch(parent_run_id, metrics=metrics, tags=tags)
    if advice.chosen is not None:
        champion = register_champion(mlflow_client, plan["workload"], advice.chosen.run_id)
        if champion:
            mlflow_client.set_tag(parent_run_id, CHAMPION_VERSION_TAG, champion)
    mlflow_client.set_terminated(parent_run_id, "FINISHED")
    return rows, advice


def log_table(mlflow_client: Any, run_id: str, rows: list[report.Row]) -> None:
    """study.csv for people and scripts, and the same rows as an MLflow table (the UI's artifact view shows it)."""
    from dataclasses import asdict

    mlflow_client.log_text(run_id, report.table_csv(rows), "study.csv")
    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in asdict(row).items():
            columns.setdefault(key, []).append(value)
    mlflow_client.log_table(run_id, columns, "study_table.json")


def register_champion(mlflow_client: Any, workload: str, run_id: str) -> str | None:
    """The run's model as a new version of the registered model named after the workload, alias ``champion``
    (moved from the previous champion, whose version stays); None when the run logged no model."""
    import mlflow

    experiment = mlflow_client.get_run(run_id).info.experiment_id
    # MLflow 3 keeps a logged model beside the run, not among its artifacts.
    models = mlflow.search_logged_models(experiment_ids=[experiment], output_format="list",
                                         filter_string=f"source_run_id = '{run_id}' AND name = 'model'")
    if not models:
        return None
    _check_logged_model(mlflow_client, run_id, models[0].artifact_location)
    version = mlflow.register_model(f"runs:/{run_id}/model", workload)
    mlflow_client.set_registered_model_alias(workload, CHAMPION_ALIAS, version.version)
    return str(version.version)


def _check_logged_model(mlflow_client: Any, run_id: str, artifact_location: str) -> None:
    """Register only a model whose files are the ones its run published: the logged directory's digests, and its
    content id against the run's ``model_version`` tag."""
    import mlflow

    from training.models import model_files

    with tempfile.TemporaryDirectory(prefix="cloudburst-champion-") as local:
        data = mlflow.artifacts.download_artifacts(artifact_uri=f"{artifact_location.rstrip('/')}/data/model",
                                                   dst_path=local)
        model_files.verified_weights(data, mlflow_client.get_run(run_id).data.tags.get("model_version"))


def advise_study(study: str, tracking_uri: str = "", goal: str = report.DEFAULT_GOAL,
                 time_limit_seconds: float | None = None) -> StudyAdvice:
    """The judged rows of a study (its parent run id, or ``latest``), the advice for ``goal`` and the model version
    the study registered."""
    from training.config import RunSpec

    uri = tracking_uri or RunSpec().resolved_tracking_uri()
    mlflow_client = tracking.client(uri)
    if study == "latest":
        study = latest_study(mlflow_client)
    try:
        parent = mlflow_client.get_run(study)
    except Exception:
        raise report.StudyError(f"--study {study!r}: no such run in {uri}") from None
    plan, rows = study_rows(mlflow_client, study)
    return StudyAdvice(study_run_id=study, workload=plan["workload"], rows=rows,
                       advice=report.advise(rows, goal, time_limit_seconds),
                       champion_version=parent.data.tags.get(CHAMPION_VERSION_TAG),
                       champion_goal=parent.data.tags.get(RECOMMENDATION_GOAL_TAG, report.DEFAULT_GOAL))


def latest_study(mlflow_client: Any) -> str:
    experiments = [e.experiment_id for e in mlflow_client.search_experiments()]
    runs = mlflow_client.search_runs(experiments, f"tags.`{report.ROLE_TAG}` = 'study'",
                                     order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
    if not runs:
        raise report.StudyError("no scaling study in this MLflow store: run the scaling_study DAG (make study)")
    return runs[0].info.run_id
