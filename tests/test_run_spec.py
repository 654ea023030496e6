"""The run specification: validation messages, and unchanged travel through mappings, CLI flags and MLflow params."""

from __future__ import annotations

import argparse
import re

import pytest

from training.config import RunSpec, RunSpecError, run_name_from
from training.workloads.mnist_elastic_cnn import VENDORED_MNIST


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"workers_per_node": 0}, "workers_per_node=0: must be ≥ 1"),
        ({"nodes": 0}, "nodes=0: must be ≥ 1"),
        ({"strategy": "allreduce-magic"}, "strategy='allreduce-magic': must be one of horovod, downpour, averaging"),
        ({"workload": "imagenet"}, "workload='imagenet': must be one of"),
        ({"epochs": 0}, "epochs=0: must be ≥ 1"),
        ({"batch_size_per_worker": 0}, "batch_size_per_worker=0: must be ≥ 1"),
        ({"learning_rate": 0.0}, "learning_rate=0.0: must be > 0"),
        ({"worker_optimizer": "rmsprop"}, "worker_optimizer='rmsprop': must be one of adagrad, sgd, momentum, adam"),
        ({"worker_optimizer": ""}, "worker_optimizer='': must be one of"),
        ({"worker_optimizer": "sgd", "strategy": "downpour"},
         "worker_optimizer='sgd': Downpour's workers step with server_optimizer (now 'adagrad'); set that instead"),
        ({"sigma": 0.0}, "sigma=0.0: must be > 0"),
        ({"alpha": -1.0}, "alpha=-1.0: must be ≥ 0"),
        ({"augment_copies": -1}, "augment_copies=-1: must be ≥ 0"),
        ({"target_accuracy": 1.5}, "target_accuracy=1.5: must be ≤ 1"),
        ({"backward_passes_per_step": 0}, "backward_passes_per_step=0: must be ≥ 1"),
        ({"run_name": "a/b"}, "run_name='a/b': may hold only"),
        ({"train_limit": 3, "nodes": 2, "workers_per_node": 2}, "train_limit=3: must give every one of the 4"),
    ],
)
def test_each_invalid_value_is_rejected_naming_the_value_and_why(settings, message):
    with pytest.raises(RunSpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        RunSpec(**settings).validate()


def test_missing_data_source_is_rejected(tmp_path):
    with pytest.raises(RunSpecError, match="data_source=.*no such directory"):
        RunSpec(data_source=str(tmp_path / "nowhere")).validate_sources()
    RunSpec().validate_sources()  # the vendored MNIST exists


def test_more_workers_than_shards_is_rejected():
    with pytest.raises(RunSpecError, match="4 workers but the dataset has 2 shards"):
        RunSpec(nodes=2, workers_per_node=2).validate_shards(2)
    RunSpec(nodes=1, workers_per_node=2).validate_shards(4)  # a worker may take several shards


@pytest.mark.parametrize(("strategy", "extra", "needed"), [
    ("horovod", {"backward_passes_per_step": 2},
     "32 per worker (batch_size_per_worker 16 × backward_passes_per_step 2)"),
    ("averaging", {"rounds_per_epoch": 3}, "48 per worker (batch_size_per_worker 16 × rounds_per_epoch 3)"),
    ("downpour", {}, "16 per worker (batch_size_per_worker 16)"),
])
def test_a_shard_too_small_for_one_step_is_refused_on_the_driver(strategy, extra, needed):
    spec = RunSpec(strategy=strategy, nodes=1, workers_per_node=2, batch_size_per_worker=16, **extra)
    minimum = int(needed.split()[0])
    spec.validate_shards(4, [minimum // 2, 500, minimum - minimum // 2, 500])  # worker 0 holds shards 0 and 2
    with pytest.raises(RunSpecError, match=f"worker 1 gets {minimum - 1} training examples but {strategy} needs "
                                           rf"at least {re.escape(needed)}"):
        spec.validate_shards(2, [500, minimum - 1])


def test_spec_survives_cli_flags_unchanged():
    spec = RunSpec(nodes=2, workers_per_node=3, epochs=7, learning_rate=0.0025, fp16_compression=True,
                   data_root="hdfs://namenode:8020/cloudburst", run_name="manual__2026-01-01")
    parser = argparse.ArgumentParser()
    RunSpec.add_arguments(parser)
    assert RunSpec.from_args(parser.parse_args(spec.to_args())) == spec


def test_spec_survives_a_mapping_and_json_types_from_dag_params():
    spec = RunSpec(workers_per_node=1, fp16_compression=True)
    assert RunSpec.from_mapping(spec.to_mapping()) == spec
    from_form = RunSpec.from_mapping({"epochs": "3", "fp16_compression": "false", "learning_rate": 1})
    assert (from_form.epochs, from_form.fp16_compression, from_form.learning_rate) == (3, False, 1.0)


def test_wrong_types_and_unknown_names_are_rejected():
    with pytest.raises(RunSpecError, match="epochs='many': expected int"):
        RunSpec.from_mapping({"epochs": "many"})
    with pytest.raises(RunSpecError, match="epochs=2.5: expected int"):
        RunSpec.from_mapping({"epochs": 2.5})
    with pytest.raises(RunSpecError, match="unknown run setting"):
        RunSpec.from_mapping({"epoch": 3})


def test_mlflow_params_hold_every_field_and_total_workers():
    params = RunSpec(nodes=2, workers_per_node=2).mlflow_params()
    assert params["total_workers"] == "4"
    assert params["workers_per_node"] == "2"
    assert set(RunSpec.__dataclass_fields__) <= set(params)


def test_dataset_locations_follow_the_inputs_that_make_them():
    spec = RunSpec(data_root="/data", train_limit=2000, test_limit=500, augment_copies=2, workers_per_node=4)
    assert spec.raw_uri() == "file:///data/mnist/raw-val-train2000-test500"
    assert spec.augmented_uri() == "file:///data/mnist/elastic-val-train2000-test500-k2-a34-s4-seed0"
    assert spec.shards_uri() == f"{spec.augmented_uri()}-shards4-seed0"
    assert spec.run_uri() == "file:///data/runs/mnist_elastic_cnn/manual"
    assert RunSpec(existing_shards="hdfs://nn:8020/s").shards_uri() == "hdfs://nn:8020/s"


def test_run_names_from_airflow_run_ids_are_valid_directory_names():
    name = run_name_from("manual__2026-11-30T05:35:55.612960+00:00")
    assert name == "manual__2026-11-30T05-35-55.612960-00-00"
    RunSpec(run_name=name).validate()


def test_cloudburst_train_rejects_a_bad_setting_before_any_spark_work(caplog, tmp_path):
    from training import cli

    assert cli.main(["train", "--workers-per-node", "0", "--data-root", str(tmp_path)]) == 2
    assert "workers_per_node=0: must be ≥ 1" in caplog.text
    assert cli.main(["train", "--data-root", str(tmp_path)]) == 2  # valid settings, but nothing sharded yet
    assert "no complete dataset" in caplog.text
    assert not any(tmp_path.iterdir())


def test_keyword_spotting_runs_have_their_own_sources_and_dataset_names():
    spec = RunSpec(workload="kws_densenet_bilstm", data_root="/data", speakers=40, seed=2, augment_copies=3,
                   features="mfcc", kws_task=35, workers_per_node=2)
    assert spec.resolved_data_source() == "synthetic"
    assert RunSpec().resolved_data_source() == str(VENDORED_MNIST)
    assert spec.raw_uri() == "file:///data/speech_commands/synthetic-v2-s40-seed2/clips-layout4-task35"
    assert spec.augmented_uri() == "file:///data/speech_commands/synthetic-v2-s40-seed2/features-layout4-task35-mfcc-k3-seed2"
    assert spec.shards_uri() == f"{spec.augmented_uri()}-shards2-seed2"
    real = spec.with_changes(data_source="/corpora/speech_commands_v0.02.tar.gz", resample=True)
    assert real.raw_uri().startswith("file:///data/speech_commands/source-")
    assert real.raw_uri().endswith("/clips-layout4-task35-resampled")
    unknowns = spec.with_changes(train_unknown_percentage=40)
    assert unknowns.raw_uri() == f"{spec.raw_uri()}-trainunknown40"
    assert spec.with_changes(train_unknown_percentage=10).raw_uri() == spec.raw_uri()  # the default keeps the old name


@pytest.mark.parametrize(("change", "message"), [
    ({"kws_task": 10}, "kws_task=10"), ({"features": "raw"}, "features='raw'"), ({"speakers": 0}, "speakers=0"),
    ({"data_sha256": "xyz"}, "data_sha256='xyz'"), ({"train_unknown_percentage": -5}, "train_unknown_percentage=-5"),
])
def test_keyword_spotting_settings_are_validated(change, message):
    with pytest.raises(RunSpecError, match=message):
        RunSpec(workload="kws_densenet_bilstm", **change).validate()


def test_a_speech_source_must_be_synthetic_a_directory_an_archive_or_a_url(tmp_path):
    speech = RunSpec(workload="kws_densenet_bilstm")
    speech.validate_sources()
    speech.with_changes(data_source=str(tmp_path)).validate_sources()
    speech.with_changes(data_source="https://example.org/speech_commands_v0.02.tar.gz").validate_sources()
    with pytest.raises(RunSpecError, match="not 'synthetic'"):
        speech.with_changes(data_source=str(tmp_path / "missing.tar.gz")).validate_sources()


def test_a_workload_s_own_defaults_apply_to_every_setting_left_out():
    kws = RunSpec(workload="kws_densenet_bilstm")
    assert (kws.epochs, kws.augment_copies, kws.batch_size_per_worker, kws.data_source) == (16, 0, 64, "synthetic")
    assert RunSpec(workload="kws_densenet_bilstm", epochs=3).epochs == 3  # given values win
    assert RunSpec.from_mapping({"workload": "kws_densenet_bilstm"}) == kws
    assert RunSpec().epochs == 5  # MNIST's


@pytest.mark.parametrize("workload", ["mnist_elastic_cnn", "kws_densenet_bilstm", "speaker_verification"])
def test_every_step_s_arguments_parse_in_its_job_and_round_trip(workload):
    import importlib

    from training.contract import SPARK_STEPS
    from training.jobs.command_line import job_parser

    spec = RunSpec(workload=workload, nodes=2, workers_per_node=3, augment_copies=4, seed=7, run_name="r1",
                   data_root="hdfs://namenode:8020/cloudburst", fp16_compression=True)
    for step in spec.definition.steps:
        module = importlib.import_module(spec.definition.job_module(step))  # the job exists and exposes the step
        assert callable(module.run_step) and callable(module.main)
        parsed = job_parser("", spark=step in SPARK_STEPS).parse_args(spec.to_args())
        assert RunSpec.from_args(parsed) == spec, step
        assert not parsed.overwrite


def test_every_setting_is_declared_once_with_a_title_a_description_and_a_default_inside_its_bounds():
    from training.config import all_settings, workload_defaults

    for entry in all_settings():
        assert entry.title and entry.description and entry.section, entry.name
        for workload in ("mnist_elastic_cnn", "kws_densenet_bilstm", "speaker_verification"):
            default = workload_defaults(workload)[entry.name]
            assert isinstance(default, entry.type), (entry.name, default)
            if entry.name != "workload":
                entry.check(default)


def test_cloudburst_settings_lists_every_flag(capsys):
    from training import cli
    from training.config import workload_settings

    assert cli.main(["settings", "--workload", "kws_densenet_bilstm"]) == 0
    listing = capsys.readouterr().out
    for entry in workload_settings("kws_densenet_bilstm"):
        assert entry.flag in listing
    assert "--alpha" not in listing  # MNIST's own


def test_shard_rows_come_only_from_a_well_formed_manifest():
    from training.config import shard_rows

    assert shard_rows({"num_shards": 2, "shards": [{"rows": 10}, {"rows": 12}]}) == [10, 12]
    for manifest in ({"num_shards": 2}, {"shards": "two"}, {"shards": [{"rows": "10"}]}, {"shards": [{"rows": True}]},
                     {"shards": [None]}):
        assert shard_rows(manifest) is None, manifest


def test_a_recorded_run_differs_by_each_changed_setting_and_by_one_this_version_no_longer_has():
    spec = RunSpec(epochs=3)
    recorded = spec.to_mapping()
    assert spec.differences(recorded) == []
    # a setting added since the run was recorded counts as equal while this spec holds its default
    older = {name: value for name, value in recorded.items() if name != "server_optimizer"}
    assert spec.differences(older) == []
    assert spec.with_changes(server_optimizer="adam").differences(older) == [
        "server_optimizer: recorded 'adagrad', now 'adam'"]
    assert spec.differences({**recorded, "epochs": 5, "strategy": "downpour"}) == [
        "epochs: recorded 5, now 3", "strategy: recorded 'downpour', now 'horovod'"]
    # a setting removed since: the run may have used it, so it is not reused, and the message says why
    assert spec.differences({**recorded, "input_dropout": 0.2}) == [
        "input_dropout: recorded 0.2, not a setting of this version"]
    spec.refuse_other_run(None)  # nothing recorded yet
    spec.refuse_other_run(recorded)
    with pytest.raises(RunSpecError, match=r"already holds a run with other settings \(epochs: recorded 5, now 3; "
                                           r"strategy: recorded 'downpour', now 'horovod'\); choose another run_name"):
        spec.refuse_other_run({**recorded, "epochs": 5, "strategy": "downpour"})
