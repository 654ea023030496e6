"""The scaling_study DAG: its form comes from the study settings, its training runs are mapped tasks in the cluster
pool, a grid over budget is refused by its first task before anything runs, and a tiny study runs end to end
through dag.test(): preparation once, a baseline, a ceiling and a run, and an MLflow parent run holding them."""

from __future__ import annotations

import json

import pytest

from training.study.plan import STUDY_SETTINGS

DAG_ID = "scaling_study"


@pytest.fixture
def dag(dag_bag):
    """A DAG object of each test's own: dag.test(run_conf=…) leaves its conf in the DAG's params, so a study after
    the over-budget one would inherit budget_minutes=5 (it did, in CI)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=dag_bag.dag_folder).dags[DAG_ID]


def test_the_form_is_the_study_settings_and_the_runs_are_mapped_tasks_in_the_cluster_pool(dag):
    from cloudburst_study import STUDY_POOL

    assert set(dag.params) == {entry.name for entry in STUDY_SETTINGS} | {"run_settings", "variants"}
    for entry in STUDY_SETTINGS:
        param = dag.params.get_param(entry.name)
        assert param.schema["title"] == entry.title and param.description == entry.description
    assert dag.params.get_param("repetitions").schema["minimum"] == 1
    assert dag.params.get_param("run_settings").schema["type"] == "object"
    assert dag.params.get_param("variants").schema["type"] == "array"
    mapped = {task.task_id for task in dag.tasks if type(task).__name__ == "MappedOperator"}
    assert mapped == {"shard", "train", "evaluate"}
    assert {dag.get_task(task_id).pool for task_id in ("ingest", "augment", "features", *mapped)} == {STUDY_POOL}
    assert dag.get_task("report").trigger_rule == "all_done"


def test_a_grid_over_budget_is_refused_by_plan_and_nothing_runs(dag, tmp_path):
    conf = {"strategies": "horovod,downpour,averaging", "workers_per_node": "1,2", "n_push": "1,4,16",
            "repetitions": 3, "budget_minutes": 5,
            "run_settings": {"data_root": str(tmp_path / "data"), "tracking_uri": f"sqlite:///{tmp_path}/m.db"}}
    dag_run = dag.test(run_conf=conf)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["plan"] == "failed", states
    assert not (tmp_path / "data").exists() and not (tmp_path / "m.db").exists()


@pytest.mark.timeout(1500)
def test_a_tiny_study_runs_end_to_end_and_its_parent_run_holds_everything(dag, tmp_path, mlflow_store_uri):
    import mlflow

    tracking_uri = mlflow_store_uri
    conf = {"strategies": "downpour", "workers_per_node": "2", "n_push": "4,16", "study_name": "tiny", "repetitions": 1,
            "run_settings": {"train_limit": 1000, "test_limit": 300, "epochs": 2, "batch_size_per_worker": 32,
                             "data_root": str(tmp_path / "data"), "tracking_uri": tracking_uri}}
    dag_run = dag.test(run_conf=conf)
    instances = dag_run.get_task_instances()
    states = {(ti.task_id, ti.map_index): ti.state for ti in instances}
    assert states[("features", -1)] == "skipped"  # MNIST has no features step
    assert {state for key, state in states.items() if key != ("features", -1)} == {"success"}, states
    assert sorted(i for t, i in states if t == "train") == [0, 1, 2, 3]  # baseline, ceiling, n_push 4 and 16
    assert sorted(i for t, i in states if t == "shard") == [0, 1]  # 1 and 2 workers
    # the Grid view names each mapped box: its configuration's run name, its shard count
    names = {(ti.task_id, ti.map_index): ti.rendered_map_index for ti in instances}
    assert {names[("train", i)] for i in range(4)} == {
        "tiny-baseline-1x1-r1", "tiny-ceiling-downpour-1x2-t0-r1", "tiny-downpour-1x2-t0-p4-r1",
        "tiny-downpour-1x2-t0-p16-r1"}
    assert {names[("evaluate", i)] for i in range(4)} == {names[("train", i)] for i in range(4)}
    assert {names[("shard", 0)], names[("shard", 1)]} == {"shards for 1 worker(s)", "shards for 2 worker(s)"}

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("mnist_elastic_cnn")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    [parent] = client.search_runs([experiment.experiment_id], "tags.`cloudburst.study_role` = 'study'")
    assert parent.info.status == "FINISHED" and parent.info.run_name == "study-tiny"
    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    roles = sorted(child.data.tags["cloudburst.study_role"] for child in children)
    assert roles == ["baseline", "ceiling", "run", "run"]
    ceiling = next(child for child in children if child.data.tags["cloudburst.study_role"] == "ceiling")
    assert ceiling.data.params["communication"] == "false" and ceiling.data.metrics.get("bytes_moved", 0) == 0
    artifacts = {item.path for item in client.list_artifacts(parent.info.run_id)}
    assert {"study.csv", "study_table.json", "speedup_and_efficiency.png", "time_to_target.png",
            "workers_per_node.png", "recommendation.md", "cost_model_leave_one_out.csv",
            "cost_model_extrapolation.csv", "cost_model_extrapolation.png"} <= artifacts
    # the cost model fitted to the two Downpour runs, each predicted by the fit to the other
    assert parent.data.tags["cloudburst.cost_model"].startswith("fitted to 2 configurations of this study")
    assert parent.data.metrics["cost_model_median_error"] >= 0
    table = client.download_artifacts(parent.info.run_id, "study.csv", str(tmp_path))
    rows = {line.split(",")[0]: line for line in open(table).read().splitlines()[1:]}
    assert set(rows) == {"baseline-1x1", "ceiling-downpour-1x2-t0", "downpour-1x2-t0-p4", "downpour-1x2-t0-p16"}
    assert parent.data.tags["cloudburst.ceiling_check"].startswith("not judged: one repetition")
    recommended = parent.data.tags["cloudburst.recommendation"]
    # a ceiling trains no usable model
    assert recommended in {"baseline-1x1", "downpour-1x2-t0-p4", "downpour-1x2-t0-p16"}
    champion = client.get_model_version_by_alias("mnist_elastic_cnn", "champion")
    assert champion.run_id in {child.info.run_id for child in children}
    report = json.loads(json.dumps(parent.data.tags))
    print(f"tiny study: recommended {recommended} ({report['cloudburst.recommendation_reason']})")


def test_a_study_without_a_name_is_named_after_its_dag_runs_date_and_time():
    from cloudburst_study import default_study_name

    assert default_study_name("manual__2026-12-02T18:48:43.667491+00:00") == "20261202-184843"
    assert default_study_name("a run id of my own") == "a-run-id-of-my-own"
