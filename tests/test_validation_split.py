"""Honest numbers: training measures (and time-to-target is taken on) the validation split; the test split is read
once, by evaluate, at the end. MNIST's validation split is the training file's last 10,000 images."""

from __future__ import annotations

import numpy as np
import pytest
from idx_files import read_idx_head, write_idx_images, write_idx_labels

from training import storage
from training.config import RunSpec
from training.datasets import image_records
from training.workloads.mnist_elastic_cnn import VENDORED_MNIST, idx


def test_mnist_validation_is_the_training_files_last_10000_images_disjoint_from_training(tmp_path):
    manifest, _ = idx.ingest(str(VENDORED_MNIST), str(tmp_path / "raw"))
    assert {split: manifest["splits"][split]["rows"] for split in ("train", "validation", "test")} == {
        "train": 50_000, "validation": 10_000, "test": 10_000}
    train = image_records.read_split(str(tmp_path / "raw"), "train")
    validation = image_records.read_split(str(tmp_path / "raw"), "validation")
    assert set(train.index.tolist()) == set(range(50_000))
    assert set(validation.index.tolist()) == set(range(50_000, 60_000))
    training_file = read_idx_head(VENDORED_MNIST / "train-images-idx3-ubyte.gz", 60_000)
    np.testing.assert_array_equal(validation.images, training_file[50_000:])
    np.testing.assert_array_equal(train.images, training_file[:50_000])
    test_file = read_idx_head(VENDORED_MNIST / "t10k-images-idx3-ubyte.gz", 10_000)
    np.testing.assert_array_equal(image_records.read_split(str(tmp_path / "raw"), "test").images, test_file)


def test_the_limits_slice_training_then_validation_and_test_alike(tmp_path):
    manifest, _ = idx.ingest(str(VENDORED_MNIST), str(tmp_path / "raw"), train_limit=300, test_limit=40)
    assert {split: manifest["splits"][split]["rows"] for split in ("train", "validation", "test")} == {
        "train": 300, "validation": 40, "test": 40}
    validation = image_records.read_split(str(tmp_path / "raw"), "validation")
    assert validation.index.tolist() == list(range(50_000, 50_040))  # still held out of training, never its head


def mislabelled_test_source(directory):
    """The first 3,000 training images (2,500 train, 500 validation) labelled as they are, and 500 test images each
    labelled one digit off: a model measured on validation scores high, the same model on test near zero."""
    directory.mkdir()
    images = read_idx_head(VENDORED_MNIST / "train-images-idx3-ubyte.gz", 3000)
    labels = read_idx_head(VENDORED_MNIST / "train-labels-idx1-ubyte.gz", 3000).reshape(-1)
    test_images = read_idx_head(VENDORED_MNIST / "t10k-images-idx3-ubyte.gz", 500)
    test_labels = (read_idx_head(VENDORED_MNIST / "t10k-labels-idx1-ubyte.gz", 500).reshape(-1) + 1) % 10
    write_idx_images(directory / "train-images-idx3-ubyte.gz", images)
    write_idx_labels(directory / "train-labels-idx1-ubyte.gz", labels)
    write_idx_images(directory / "t10k-images-idx3-ubyte.gz", test_images)
    write_idx_labels(directory / "t10k-labels-idx1-ubyte.gz", test_labels)
    return directory


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["horovod", "averaging"])
def test_training_measures_validation_and_evaluate_reads_test_once(spark, tmp_path, strategy):
    """If any per-epoch figure, the time to target or the learning curve were taken on the test split, the
    mislabelled test set would hold val_accuracy near zero and the target would never be reached."""
    from pipeline_data import prepare_datasets

    from training.jobs.evaluate import evaluate_run
    from training.jobs.train import train_run

    spec = RunSpec(data_source=str(mislabelled_test_source(tmp_path / "mnist")), strategy=strategy, nodes=1,
                   workers_per_node=1, epochs=2, batch_size_per_worker=32, evaluations_per_epoch=2,
                   target_accuracy=0.6, augment_copies=0, rounds_per_epoch=2, data_root=str(tmp_path / "root"),
                   tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", run_name=f"honest-{strategy}")
    prepare_datasets(spark, spec)
    record = train_run(spark, spec)
    result = record["result"]
    assert all(evaluation["val_accuracy"] > 0.3 for evaluation in result["evaluations"][1:])
    assert result["epochs"][-1]["val_accuracy"] > 0.8
    assert result["time_to_target_seconds"] is not None
    evaluation = evaluate_run(spec)
    assert evaluation["metrics"]["test_accuracy"] < 0.2  # the same model on the mislabelled test split
    from training import tracking

    run = tracking.client(spec.resolved_tracking_uri()).get_run(record["mlflow_run_id"])
    assert run.data.metrics["val_accuracy"] > 0.8 and run.data.metrics["test_accuracy"] < 0.2
    assert storage.require_manifest(spec.augmented_uri())["splits"]["validation"]["rows"] == 500
