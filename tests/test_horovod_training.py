"""Real Horovod (Gloo) processes launched through Spark, on a small slice of the real MNIST."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pipeline_data import prepare_datasets
from training_jobs import kill_job_after_first_checkpoint, retry_job

from training import storage
from training.config import RunSpec
from training.jobs.train import RESULT_FILE, train_run
from training.strategies.base import EvaluationSet
from training.strategies.horovod import HorovodStrategy

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def small_spec(spark, tmp_path_factory) -> RunSpec:
    root = tmp_path_factory.mktemp("horovod")
    spec = RunSpec(train_limit=1000, test_limit=400, epochs=1, batch_size_per_worker=32, workers_per_node=2,
                   data_root=str(root / "data"), tracking_uri=f"sqlite:///{root / 'mlflow.db'}", run_name="small")
    prepare_datasets(spark, spec)
    return spec


def test_two_horovod_ranks_end_with_identical_weights_and_learn(spark, small_spec):
    result = HorovodStrategy().train(small_spec, small_spec.shards_uri(), EvaluationSet(small_spec.augmented_uri()),
                                     storage.join(small_spec.run_uri(), "direct"), spark)
    digests = result.extra["weights_sha256_per_rank"]
    assert len(digests) == 2
    assert digests[0] == digests[1]
    assert result.extra["ranks_in_sync"] is True
    assert [row["epoch"] for row in result.epochs] == [1]
    assert result.epochs[0]["val_accuracy"] > 0.6  # 1,000 images for one epoch: far above chance (0.1)
    assert len(result.evaluations) == small_spec.evaluations_per_epoch
    assert result.extra["threads_per_worker"] == max(1, (os.cpu_count() or 1) // 2)
    assert result.extra["network_interface"] == "lo"  # local mode: no interface that may vanish mid-run
    assert (Path(storage.resolve(result.model_uri).path) / "weights.npz").is_file()
    # The ring's bytes: 2 ranks each send their float32 gradients once per step (2(N−1)/N of them, N = 2).
    from training.workload_registry import workload_for

    gradients = 4 * workload_for(small_spec).build_model().count_params()
    assert result.metrics["bytes_moved"] == 2 * gradients * result.extra["steps_per_epoch"] * small_spec.epochs


def test_a_cosine_decay_after_the_warm_up_trains_with_horovods_own_callbacks(spark, small_spec):
    spec = small_spec.with_changes(epochs=2, warmup_epochs=1, learning_rate_decay="cosine", run_name="cosine")
    result = HorovodStrategy().train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()),
                                     storage.join(spec.run_uri(), "direct"), spark)
    assert [row["epoch"] for row in result.epochs] == [1, 2] and result.extra["ranks_in_sync"] is True
    assert result.epochs[-1]["val_accuracy"] > 0.6


def test_the_worker_optimizer_setting_is_what_the_ranks_step_with(spark, small_spec):
    import tensorflow as tf

    spec = small_spec.with_changes(worker_optimizer="adagrad", learning_rate=0.1, run_name="adagrad")
    run_uri = storage.join(spec.run_uri(), "direct")
    result = HorovodStrategy().train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()), run_uri, spark)
    assert result.extra["ranks_in_sync"] is True and result.epochs[0]["val_accuracy"] > 0.3  # chance: 0.1
    # The checkpoint holds the optimizer's slots: Adagrad's accumulators, none of Adam's moments.
    [state] = Path(storage.resolve(run_uri).path).glob("checkpoints/epoch-*/state.index")
    slots = {name.split(".OPTIMIZER_SLOT/optimizer/")[1].split("/")[0]
             for name, _ in tf.train.list_variables(str(state.with_suffix(""))) if ".OPTIMIZER_SLOT/" in name}
    assert slots == {"accumulator"}


def test_with_weight_averaging_the_ranks_evaluate_and_save_the_average(spark, small_spec):
    from training.models.model_files import load_model
    from training.strategies.evaluation_clock import correct_predictions
    from training.workload_registry import workload_for

    spec = small_spec.with_changes(epochs=2, weight_average_decay=0.9, run_name="averaged")
    evaluation = EvaluationSet(spec.augmented_uri())
    result = HorovodStrategy().train(spec, spec.shards_uri(), evaluation, storage.join(spec.run_uri(), "direct"),
                                     spark)
    assert result.extra["ranks_in_sync"] is True  # both ranks hold the same average
    last = result.epochs[-1]
    assert last["val_accuracy"] > 0.6 and last["val_accuracy_trained_weights"] > 0.6
    # The saved model is the average the last evaluation measured, not the weights training ended with.
    images, labels = evaluation.load(workload_for(spec))
    saved_accuracy = correct_predictions(load_model(result.model_uri), images, labels) / len(labels)
    assert saved_accuracy == pytest.approx(last["val_accuracy"])


def test_with_batch_norm_the_ranks_end_with_the_averaged_statistics(spark, small_spec):
    from training.models.model_files import load_model

    spec = small_spec.with_changes(batch_norm=True, epochs=2, run_name="normalized")
    result = HorovodStrategy().train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()),
                                     storage.join(spec.run_uri(), "direct"), spark)
    # Each rank's moving means and variances come from its own shard: without the closing all-reduce the ranks
    # would end with different weights.
    assert result.extra["ranks_in_sync"] is True
    # ~30 steps leave the moving statistics (momentum 0.99) mostly at their start, so held-out accuracy says little
    # yet; the training accuracy, taken with each batch's own statistics, shows the ranks learned.
    assert result.epochs[-1]["train_accuracy"] > 0.6
    statistics = load_model(result.model_uri).non_trainable_weights
    assert statistics and all(float(abs(variable).numpy().sum()) > 0 for variable in statistics)


def test_a_finished_run_is_not_trained_again(spark, small_spec, request):
    first = train_run(spark, small_spec)
    started = time.perf_counter()
    again = train_run(spark, small_spec)
    assert again["mlflow_run_id"] == first["mlflow_run_id"]
    assert time.perf_counter() - started < 5
    # The train step (a retried task) settles it before any Spark session: no JVM, no YARN application.
    from training.jobs import train

    request.getfixturevalue("spark_forbidden")
    assert train.run_step(small_spec) == small_spec.run_uri()
    with pytest.raises(AssertionError, match="a Spark session was started"):
        train.run_step(small_spec.with_changes(run_name="not-trained-yet"))


def test_a_killed_training_job_resumes_from_its_last_checkpoint(small_spec):
    spec = RunSpec(**{**small_spec.to_mapping(), "epochs": 8, "run_name": "killed"})
    killed_after = kill_job_after_first_checkpoint(spec)  # the driver, Spark and the Horovod ranks
    assert storage.read_json(storage.join(spec.run_uri(), RESULT_FILE)) is None

    retry = retry_job(spec)
    record = storage.read_json(storage.join(spec.run_uri(), RESULT_FILE))
    assert record["result"]["resumed_from_epoch"] >= killed_after
    assert [row["epoch"] for row in record["result"]["epochs"]] == list(range(1, spec.epochs + 1))
    assert "resuming after epoch" in retry.stdout + retry.stderr
