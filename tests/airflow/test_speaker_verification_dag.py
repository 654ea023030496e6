"""The speaker_verification DAG: models A and B train as parallel branches between ingest and scoring, its form
offers the verification settings, bad settings stop it early, and a real run on a small synthetic corpus ends with
the two models' training runs and one system run in MLflow (EER per model and fused, DET curves)."""

from __future__ import annotations

import pytest

from training import storage
from training.config import RunSpec, RunSpecError, run_name_from, workload_settings

DAG_ID = "speaker_verification"
BRANCH = ["features", "shard", "check_shards", "train"]


@pytest.fixture(scope="module")
def dag(dag_bag):
    return dag_bag.dags[DAG_ID]


def test_models_a_and_b_are_parallel_branches_between_ingest_and_score(dag):
    for model in ("model_a", "model_b"):
        tasks = [f"{model}.{step}" for step in BRANCH]
        assert dag.get_task("ingest").downstream_task_ids >= {tasks[0]}
        for upstream, downstream in zip(tasks, tasks[1:], strict=False):
            assert dag.get_task(upstream).downstream_task_ids == {downstream}
        assert dag.get_task(tasks[-1]).downstream_task_ids == {"score"}
    assert dag.get_task("score").upstream_task_ids == {"model_a.train", "model_b.train"}
    assert dag.get_task("score").downstream_task_ids == {"fuse"}
    assert dag.get_task("fuse").downstream_task_ids == {"evaluate"}
    assert {dag.get_task(f"{model}.features").branch for model in ("model_a", "model_b")} == {"model_a", "model_b"}


def test_the_form_has_the_verification_settings_and_fixes_the_models_per_branch(dag):
    assert set(dag.params) == {entry.name for entry in workload_settings(DAG_ID) if entry.on_form}
    assert {"enrollment_utterances", "bootstrap_resamples", "speakers", "held_out_families"} <= set(dag.params)
    assert not {"embedding_model", "features", "kws_task", "alpha"} & set(dag.params)
    assert dag.params["speakers"] == 300 and dag.params["data_source"] == "synthetic"
    assert dag.params.get_param("enrollment_utterances").schema["enum"] == [1, 3, 5]


def context_for(**params):
    from cloudburst_params import run_params

    values = {name: param.value for name, param in run_params(DAG_ID).items()}
    return {"params": {**values, **params}, "run_id": "manual__2026-12-02T10:00:00+00:00"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"enrollment_utterances": 4}, "enrollment_utterances=4"),
        ({"speakers": 0}, "speakers=0"),
        ({"bootstrap_resamples": 5}, "bootstrap_resamples=5"),
        ({"data_source": "/nonexistent/speech"}, "data_source='/nonexistent/speech': not 'synthetic'"),
    ],
)
def test_bad_settings_are_rejected_before_any_work(params, message):
    from cloudburst_operators import validate_run

    with pytest.raises((RunSpecError, ValueError), match=message):
        validate_run(DAG_ID, **context_for(**params))


def test_each_branch_task_runs_its_model_with_its_own_features_and_run_directory():
    from cloudburst_operators import run_spec

    context = context_for(data_root="/tmp/cloudburst-sv-test")
    whole = run_spec(context, DAG_ID)
    specs = {model: run_spec(context, DAG_ID, model) for model in ("model_a", "model_b")}
    assert (specs["model_a"].features, specs["model_b"].features) == ("log_mel", "mfcc")
    assert len({spec.run_uri() for spec in (whole, *specs.values())}) == 3
    assert all(spec.run_uri().startswith(whole.run_uri() + "/") for spec in specs.values())
    assert specs["model_a"].augmented_uri() != specs["model_b"].augmented_uri()
    assert specs["model_b"].whole_run() == whole


def test_the_dag_is_also_scheduled_on_the_keyword_spotters_model(dag, dag_bag):
    """Data-aware scheduling: the asset the keyword-spotting DAG's train task publishes is this DAG's schedule."""
    [published] = dag_bag.dags["kws_densenet_bilstm"].get_task("train").outlets
    scheduled = list(dag.timetable.asset_condition.objects)
    assert [(asset.name, asset.uri) for asset in scheduled] == [(published.name, published.uri)]


def test_an_asset_triggered_run_starts_model_a_from_the_spotter_the_newest_event_names(triggering_events):
    import datetime

    from cloudburst_operators import run_spec, validate_run

    from training import workload_registry as workloads

    name, uri = workloads.definition(DAG_ID).scheduled_on
    day = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)
    events = triggering_events((name, uri, {"uri": "/data/runs/kws_densenet_bilstm/older"}, day),
                               (name, uri, {"uri": "/data/runs/kws_densenet_bilstm/newer"},
                                day + datetime.timedelta(hours=1)))
    context = {**context_for(data_root="/tmp/cloudburst-sv-test"), "triggering_asset_events": events,
               "run_id": "asset_triggered__2026-12-02T11:00:00+00:00"}
    for branch in ("", "model_a", "model_b"):  # every task of the run agrees
        assert run_spec(context, DAG_ID, branch).transfer_from == "/data/runs/kws_densenet_bilstm/newer"
    assert validate_run(DAG_ID, **context)["transfer_from"] == "/data/runs/kws_densenet_bilstm/newer"
    # A value given in the Params wins; a manual run (no event) trains from scratch as before.
    chosen = {**context, "params": {**context["params"], "transfer_from": "auto"}}
    assert run_spec(chosen, DAG_ID).transfer_from == "auto"
    assert run_spec(context_for(), DAG_ID).transfer_from == ""
    assert run_spec({**context_for(), "triggering_asset_events": triggering_events()}, DAG_ID).transfer_from == ""


@pytest.mark.parametrize("extra", [{}, {"uri": ""}, {"uri": 42}, {"data_version": "x"}])
def test_an_asset_event_without_a_run_is_refused_in_one_line(triggering_events, extra):
    import datetime

    from cloudburst_operators import validate_run

    from training import workload_registry as workloads

    name, uri = workloads.definition(DAG_ID).scheduled_on
    events = triggering_events((name, uri, extra, datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)))
    with pytest.raises(RunSpecError, match="carries no 'uri'"):
        validate_run(DAG_ID, **{**context_for(), "triggering_asset_events": events})


def test_an_asset_event_naming_no_run_directory_is_refused(triggering_events):
    import datetime

    from cloudburst_operators import validate_run

    from training import workload_registry as workloads

    name, uri = workloads.definition(DAG_ID).scheduled_on
    events = triggering_events((name, uri, {"uri": "relative/run dir"},
                                datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)))
    with pytest.raises(RunSpecError, match="transfer_from"):
        validate_run(DAG_ID, **{**context_for(), "triggering_asset_events": events})


@pytest.mark.timeout(1500)
def test_a_real_run_on_a_small_synthetic_corpus(dag, tmp_path):
    import mlflow

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    conf = {"speakers": 40, "epochs": 2, "batch_size_per_worker": 32, "bootstrap_resamples": 20,
            "workers_per_node": 1, "held_out_families": "rhvoice", "data_root": str(tmp_path / "data"),
            "tracking_uri": tracking_uri}
    dag_run = dag.test(run_conf=conf)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    expected = ["validate_run", "wait_for_raw_data", "ingest", "score", "fuse", "evaluate",
                *(f"{model}.{step}" for model in ("model_a", "model_b") for step in BRANCH)]
    assert states == {task_id: "success" for task_id in expected}, states

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(DAG_ID)
    runs = client.search_runs([experiment.experiment_id])
    by_kind = {run.data.tags.get("kind", run.data.params["embedding_model"]): run for run in runs}
    assert set(by_kind) == {"model_a", "model_b", "verification_system"}, [run.data.tags for run in runs]
    assert all(run.info.status == "FINISHED" for run in runs)
    for model, features in (("model_a", "log_mel"), ("model_b", "mfcc")):
        run = by_kind[model]
        assert run.data.params["features"] == features
        assert {"test_accuracy", "model_parameters", "samples_per_second_mean", "speedup"} <= set(run.data.metrics)
    system = by_kind["verification_system"]
    metrics = system.data.metrics
    assert {"eer", "min_dcf", "eer_model_a_all", "eer_model_b_all", "eer_logistic_fusion_all",
            "eer_threshold_logistic_fusion_all", "cllr_logistic_fusion_all", "trials_all_targets"} <= set(metrics)
    assert 0 <= metrics["eer"] <= 1 and metrics["trials_all_targets"] > 0
    # The speakers of the held-out engine are evaluation speakers only, reported on their own.
    assert {"eer_logistic_fusion_held_out_families", "eer_model_a_training_families"} <= set(metrics)
    assert metrics["trials_held_out_families_targets"] > 0
    assert 0.9 <= metrics["parameter_ratio_b_to_a"] <= 1.1  # models of similar size
    assert system.data.tags["model_a_run_id"] == by_kind["model_a"].info.run_id
    artifacts = {item.path for item in client.list_artifacts(system.info.run_id)}
    assert {"det_all.png", "score_histograms.png", "verification_report.json"} <= artifacts
    spec = RunSpec.from_mapping({**conf, "workload": DAG_ID, "run_name": run_name_from(dag_run.run_id)})
    assert storage.read_manifest(storage.join(spec.whole_run().run_uri(), "system")) is not None
