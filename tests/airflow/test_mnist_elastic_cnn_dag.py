"""The mnist_elastic_cnn DAG: it loads, its form explains itself, bad settings stop it early, and a real run on a
small slice of MNIST ends with everything in MLflow."""

from __future__ import annotations

import pytest

from training.config import STRATEGIES, RunSpec, RunSpecError, setting, workload_settings

DAG_ID = "mnist_elastic_cnn"
PIPELINE = ["validate_run", "wait_for_raw_data", "ingest", "augment", "shard", "check_shards", "train", "evaluate"]


@pytest.fixture(scope="module")
def dag(dag_bag):
    return dag_bag.dags[DAG_ID]


def test_the_dag_loads_and_chains_the_pipeline_in_order(dag):
    for upstream, downstream in zip(PIPELINE, PIPELINE[1:], strict=False):
        assert dag.get_task(upstream).downstream_task_ids == {downstream}
    assert set(dag.task_ids) == set(PIPELINE)
    assert dag.schedule is None or str(dag.timetable.summary) == "None"
    spark_tasks = {task.task_id for task in dag.tasks if type(task).__name__ == "CloudburstSparkJobOperator"}
    assert spark_tasks == {"augment", "shard", "train"}
    assert [outlet.name for outlet in dag.get_task("augment").outlets] == ["mnist_elastic"]


def test_every_param_is_typed_titled_described_and_defaults_to_the_run_spec(dag):
    defaults = RunSpec(workload=DAG_ID)
    for name in dag.params:
        param = dag.params.get_param(name)
        schema = param.schema
        assert schema.get("type"), name
        if param.value == "":
            assert "null" in schema["type"], f"{name}: an empty form field is sent as null"
        assert schema.get("title"), name
        assert param.description, name
        if name != "run_name":
            assert param.value == getattr(defaults, name), name
    assert set(dag.params) == {entry.name for entry in workload_settings(DAG_ID) if entry.on_form}
    assert not {"speakers", "kws_task", "features", "resample", "data_sha256"} & set(dag.params)
    assert dag.params.get_param("strategy").schema["enum"] == list(STRATEGIES)


def test_the_form_bounds_are_the_settings_bounds(dag):
    """One declaration: the form refuses exactly what validate() refuses."""
    for name in dag.params:
        schema, entry = dag.params.get_param(name).schema, setting(name)
        assert schema.get("minimum", schema.get("exclusiveMinimum")) == entry.minimum, name
        assert schema.get("maximum") == entry.maximum, name
        assert ("exclusiveMinimum" in schema) == entry.exclusive_minimum, name
    assert dag.params.get_param("workers_per_node").schema["maximum"] == 64
    with pytest.raises(RunSpecError, match="workers_per_node=65"):
        RunSpec(workers_per_node=65).validate()


def context_for(**params):
    from cloudburst_params import run_params

    values = {name: param.value for name, param in run_params(DAG_ID).items()}
    return {"params": {**values, **params}, "run_id": "manual__2026-11-30T10:00:00+00:00"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"workers_per_node": 0}, "workers_per_node=0"),
        ({"strategy": "parameter-server"}, "strategy='parameter-server'"),
        ({"data_source": "/nonexistent/mnist"}, "data_source='/nonexistent/mnist': no such directory"),
        ({"existing_shards": "missing"}, "no complete dataset"),
    ],
)
def test_bad_settings_are_rejected_by_the_first_task_before_any_spark_job(params, message):
    from cloudburst_operators import validate_run

    with pytest.raises((RunSpecError, ValueError), match=message):
        validate_run(DAG_ID, **context_for(**params))


def test_more_workers_than_existing_shards_is_rejected_before_spark(tmp_path):
    from cloudburst_operators import validate_run

    from training import storage

    shards = str(tmp_path / "shards")
    storage.publish(shards, "image-shards", {}, lambda staging: {"num_shards": 2})
    with pytest.raises(RunSpecError, match="4 workers but the dataset has 2 shards"):
        validate_run(DAG_ID, **context_for(nodes=2, workers_per_node=2, existing_shards=shards))


def test_a_trigger_with_an_out_of_range_param_never_starts(dag, tmp_path):
    with pytest.raises(Exception, match="workers_per_node") as raised:  # noqa: PT011 - Airflow's own error types
        dag.test(run_conf={"workers_per_node": 0, "data_root": str(tmp_path)})
    assert "minimum" in str(raised.value) or "0 is less than" in str(raised.value)
    assert not any(tmp_path.iterdir()), "a task ran although the trigger was invalid"


@pytest.fixture(scope="module")
def shared_data_root(tmp_path_factory) -> str:
    """One data root for the three strategies' runs, as DAG runs on one machine share ./var: the first run
    publishes the slice, the others find ingest, augment and shard done (what a retried task meets) and train."""
    return str(tmp_path_factory.mktemp("shared") / "data")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_real_run_on_a_small_slice_ends_with_params_metrics_and_artifacts_in_mlflow(dag, tmp_path, strategy,
                                                                                     shared_data_root):
    import mlflow

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # Asynchronous Downpour on 2000 images is still at the knee of its learning curve after one epoch (test
    # accuracy 0.20-0.64 in six runs); four epochs end at 0.90-0.91 and cost about 3 s more.
    epochs = 4 if strategy == "downpour" else 1
    conf = {"train_limit": 2000, "test_limit": 500, "epochs": epochs, "batch_size_per_worker": 64, "strategy": strategy,
            "data_root": shared_data_root, "tracking_uri": tracking_uri}
    dag_run = dag.test(run_conf=conf)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {task_id: "success" for task_id in PIPELINE}, states

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(DAG_ID)
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert (params["workload"], params["strategy"], params["workers_per_node"], params["total_workers"]) == (
        DAG_ID, strategy, "2", "2")
    assert params["train_limit"] == "2000"
    assert len(params["data_version"]) == 12
    metrics = run.data.metrics
    assert 0.5 < metrics["test_accuracy"] <= 1.0
    assert metrics["wall_seconds"] > 0
    assert {f"test_accuracy_class_{label}" for label in range(10)} <= set(metrics)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "samples_per_second")] == list(
        range(1, epochs + 1))
    assert run.data.tags["config"] == "1x2"
    artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"learning_curves.png", "confusion_matrix.png", "shard_manifest.json", "run_spec.json"} <= artifacts
    assert client.search_logged_models([experiment.experiment_id]), "the model was not logged"
    if strategy == "downpour":  # the parameter server's observations
        assert metrics["lost_workers"] == 0 and metrics["pushes"] > 0 and metrics["bytes_moved"] > 0
        assert metrics["staleness_max"] >= metrics["staleness_mean"] >= 0
        assert "staleness_histogram.png" in artifacts
        assert params["n_push"] == "4" and params["server_optimizer"] == "adagrad"


def test_a_run_name_taken_by_a_run_with_other_settings_is_refused_before_any_step(tmp_path):
    """`make demo` then a Downpour demo under the same run name: refused up front, not at the train task."""
    from cloudburst_operators import validate_run

    from training import storage
    from training.contract import RUN_SPEC_FILE

    taken = context_for(data_root=str(tmp_path), run_name="demo-1x2")
    spec = RunSpec.from_mapping({**taken["params"], "workload": DAG_ID})
    storage.write_json(storage.join(spec.run_uri(), RUN_SPEC_FILE), spec.to_mapping())
    validate_run(DAG_ID, **taken)  # the same settings: a retry resumes, fine
    with pytest.raises(RunSpecError, match="run_name='demo-1x2'.*already holds a run with other settings .strategy"):
        validate_run(DAG_ID, **context_for(data_root=str(tmp_path), run_name="demo-1x2", strategy="downpour"))
