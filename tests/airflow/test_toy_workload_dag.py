"""Adding a workload takes one package (tests/toy_workload/) and one DAG call: the toy runs end to end through
dag.test() under every strategy, with the same MLflow names as the real workloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import STRATEGIES

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ["validate_run", "wait_for_raw_data", "ingest", "shard", "check_shards", "train", "evaluate"]


@pytest.fixture(scope="module")
def toy_dag():
    """The toy's DAG file is one call; conftest registers the package and its DAG bundle."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_ROOT / "tests" / "toy_workload" / "dags"))
    assert bag.import_errors == {}
    return bag.dags["toy_dense"]


def test_the_toy_dag_is_its_steps_with_its_defaults_on_the_form(toy_dag):
    for upstream, downstream in zip(PIPELINE, PIPELINE[1:], strict=False):
        assert toy_dag.get_task(upstream).downstream_task_ids == {downstream}
    assert toy_dag.params["epochs"] == 2 and toy_dag.params["batch_size_per_worker"] == 32
    assert "alpha" not in toy_dag.params and "speakers" not in toy_dag.params


def test_the_toy_owns_its_shard_step_and_spark_submits_its_own_file(toy_dag):
    """A workload package may own a Spark step: the operator submits the file of the definition's job module."""
    from cloudburst_operators import CloudburstSparkJobOperator

    assert Path(toy_dag.get_task("shard").application) == REPO_ROOT / "tests" / "toy_workload" / "shard.py"
    assert Path(toy_dag.get_task("train").application) == REPO_ROOT / "training" / "jobs" / "train.py"
    # a study's task learns its workload from its settings, so its file is chosen when it runs
    assert Path(CloudburstSparkJobOperator(task_id="study_shard", step="shard").application) \
        == REPO_ROOT / "training" / "jobs" / "shard.py"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_toy_workload_trains_under_every_strategy(toy_dag, tmp_path, strategy):
    import mlflow

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dag_run = toy_dag.test(run_conf={"strategy": strategy, "data_root": str(tmp_path / "data"),
                                     "tracking_uri": tracking_uri})
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {task_id: "success" for task_id in PIPELINE}, states
    client = mlflow.MlflowClient(tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name("toy_dense").experiment_id])
    assert (run.data.params["workload"], run.data.params["strategy"]) == ("toy_dense", strategy)
    assert run.data.metrics["test_accuracy"] > 0.6  # three well-separated blobs; chance is 1/3
    assert {"test_accuracy_class_a", "samples_per_second", "wall_seconds"} <= set(run.data.metrics)
    assert run.data.tags["config"] == "1x2"
