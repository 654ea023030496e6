"""The augment and shard jobs on a real local[2] Spark session, on slices of the real MNIST."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from training import sharding, storage
from training.datasets import image_records
from training.datasets.image_records import ImageBatch, binary_column, pixels_of
from training.jobs.shard import shard_dataset
from training.workloads.mnist_elastic_cnn import VENDORED_MNIST, elastic, idx
from training.workloads.mnist_elastic_cnn.augment_job import augment_dataset

pytestmark = pytest.mark.spark


def publish_mnist_slice(destination: str, train_rows: int, test_rows: int) -> dict:
    """A raw dataset holding the first rows of the real MNIST's splits, published like `cloudburst ingest`."""
    splits = idx.with_validation_split(idx.load(str(VENDORED_MNIST))[0])
    sliced = {
        "train": ImageBatch(*(column[:train_rows] for column in vars(splits["train"]).values())),
        "validation": ImageBatch(*(column[:test_rows] for column in vars(splits["validation"]).values())),
        "test": ImageBatch(*(column[:test_rows] for column in vars(splits["test"]).values())),
    }

    def write(staging: storage.Location) -> dict:
        for split, batch in sliced.items():
            image_records.write_split(staging, split, batch, rows_per_file=max(1, len(batch) // 3))
        return {
            "image_shape": [28, 28],
            "splits": {split: {"rows": len(batch), "class_histogram": idx.class_histogram(batch.labels)}
                       for split, batch in sliced.items()},
        }

    manifest, _ = storage.publish(destination, idx.DATASET_KIND, {"slice": [train_rows, test_rows]}, write)
    return manifest


@pytest.fixture(scope="module")
def raw_slice(tmp_path_factory) -> str:
    destination = str(tmp_path_factory.mktemp("raw") / "mnist-slice")
    publish_mnist_slice(destination, train_rows=600, test_rows=100)
    return destination


@pytest.fixture(scope="module")
def augmented_slice(spark, raw_slice, tmp_path_factory) -> str:
    destination = str(tmp_path_factory.mktemp("augmented") / "elastic")
    augment_dataset(spark, raw_slice, destination, copies=2, seed=7)
    return destination


def leftovers(destination: str) -> list[Path]:
    path = Path(storage.resolve(destination).path)
    return sorted(path.parent.glob(f".{path.name}.tmp-*"))


def test_augment_keeps_originals_and_adds_copies_of_training_images_only(augmented_slice, raw_slice):
    raw_train = idx.read_split(raw_slice, "train")
    augmented = idx.read_split(augmented_slice, "train")
    assert len(augmented) == 3 * len(raw_train)
    assert sorted(np.bincount(augmented.copy)) == [600, 600, 600]
    originals = augmented.copy == 0
    order = np.argsort(augmented.index[originals])
    assert np.array_equal(augmented.images[originals][order], raw_train.images)
    for split in ("validation", "test"):  # copied as they are, never augmented
        copied, raw = idx.read_split(augmented_slice, split), idx.read_split(raw_slice, split)
        assert np.array_equal(copied.images[np.argsort(copied.index)], raw.images[np.argsort(raw.index)])
    manifest = storage.require_manifest(augmented_slice)
    assert manifest["splits"]["train"]["rows"] == 1800
    assert manifest["splits"]["validation"]["rows"] == manifest["splits"]["test"]["rows"] == 100
    assert manifest["augmentation"] == {"method": "elastic", "copies": 2, "alpha": 34.0, "sigma": 4.0, "seed": 7}
    assert "preview.png" in manifest["files"]


def test_spark_deformations_equal_the_vectorised_function_whatever_the_partitioning(augmented_slice, raw_slice):
    raw_train = idx.read_split(raw_slice, "train")
    augmented = idx.read_split(augmented_slice, "train")
    second = augmented.copy == 2
    order = np.argsort(augmented.index[second])
    expected = elastic.elastic_deform(
        raw_train.images, raw_train.index, np.full(len(raw_train), 2, np.int16), seed=7
    )
    assert np.array_equal(augmented.images[second][order], expected)
    assert not np.array_equal(expected, raw_train.images)


def test_augment_rerun_writes_identical_bytes_and_same_destination_is_a_noop(
    spark, raw_slice, augmented_slice, tmp_path
):
    again, created = augment_dataset(spark, raw_slice, str(tmp_path / "again"), copies=2, seed=7)
    assert created
    assert again["files"] == storage.require_manifest(augmented_slice)["files"]
    manifest, created = augment_dataset(spark, raw_slice, augmented_slice, copies=2, seed=7)
    assert not created
    assert manifest["data_version"] == again["data_version"]


def test_augment_with_another_seed_to_an_existing_dataset_is_refused(spark, raw_slice, augmented_slice):
    with pytest.raises(storage.DatasetError, match="already holds a different dataset"):
        augment_dataset(spark, raw_slice, augmented_slice, copies=2, seed=8)


def test_augment_rejects_bad_parameters_and_missing_source_before_spark_work(spark, raw_slice, tmp_path):
    with pytest.raises(ValueError, match="alpha"):
        augment_dataset(spark, raw_slice, str(tmp_path / "a"), alpha=-1.0)
    with pytest.raises(ValueError, match="copies"):
        augment_dataset(spark, raw_slice, str(tmp_path / "b"), copies=-2)
    with pytest.raises(storage.DatasetError, match="no complete dataset"):
        augment_dataset(spark, str(tmp_path / "nothing"), str(tmp_path / "c"))
    assert not any(tmp_path.iterdir())


def test_failed_augment_job_publishes_nothing(spark, raw_slice, tmp_path):
    broken = tmp_path / "broken"
    publish_mnist_slice(str(broken), train_rows=90, test_rows=10)
    victim = sorted((broken / "train").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    destination = str(tmp_path / "out")
    with pytest.raises(Exception):  # noqa: B017 - Spark raises its own wrapper of the Parquet error
        augment_dataset(spark, str(broken), destination, copies=1)
    assert storage.read_manifest(destination) is None
    assert not Path(destination).exists()
    assert leftovers(destination) == []


def test_shards_cover_every_example_exactly_once_stratified_and_readable_with_pyarrow(spark, augmented_slice, tmp_path):
    destination = str(tmp_path / "shards")
    manifest, created = shard_dataset(spark, augmented_slice, destination, num_shards=3, seed=1)
    assert created
    batches = [sharding.read_shard_images(destination, shard) for shard in range(3)]
    keys = [set(zip(batch.index.tolist(), batch.copy.tolist(), strict=True)) for batch in batches]
    source = idx.read_split(augmented_slice, "train")
    assert set().union(*keys) == set(zip(source.index.tolist(), source.copy.tolist(), strict=True))
    assert sum(len(batch) for batch in batches) == len(source)
    histograms = np.array([np.bincount(batch.labels, minlength=10) for batch in batches])
    assert (histograms.max(axis=0) - histograms.min(axis=0)).max() <= 1
    assert max(map(len, batches)) - min(map(len, batches)) <= 1
    assert [shard["class_histogram"] for shard in manifest["shards"]] == histograms.tolist()
    # shuffled: a shard is not in source order
    assert not np.all(np.diff(batches[0].index) >= 0)


def test_sharding_is_deterministic_per_seed_and_a_rerun_is_a_noop(spark, augmented_slice, tmp_path):
    first, _ = shard_dataset(spark, augmented_slice, str(tmp_path / "first"), num_shards=2, seed=3)
    second, _ = shard_dataset(spark, augmented_slice, str(tmp_path / "second"), num_shards=2, seed=3)
    other, _ = shard_dataset(spark, augmented_slice, str(tmp_path / "other"), num_shards=2, seed=4)
    assert first["files"] == second["files"]
    assert first["files"] != other["files"]
    _, created = shard_dataset(spark, augmented_slice, str(tmp_path / "first"), num_shards=2, seed=3)
    assert not created


def test_sharding_rejects_more_shards_than_examples_and_bad_counts(spark, raw_slice, tmp_path):
    with pytest.raises(ValueError, match="would leave shards empty"):
        shard_dataset(spark, raw_slice, str(tmp_path / "a"), num_shards=601)
    with pytest.raises(ValueError, match="integer ≥ 1"):
        shard_dataset(spark, raw_slice, str(tmp_path / "b"), num_shards=0)
    with pytest.raises(ValueError, match="workers_per_node"):
        sharding.shard_count(nodes=2, workers_per_node=0)
    with pytest.raises(storage.DatasetError, match="out of range"):
        shard_dataset(spark, raw_slice, str(tmp_path / "c"), num_shards=2)
        sharding.read_shard(str(tmp_path / "c"), 2)


def test_sharding_the_real_mnist_is_complete_disjoint_and_stratified(spark, tmp_path):
    raw = str(tmp_path / "raw")
    idx.ingest(str(VENDORED_MNIST), raw)
    destination = str(tmp_path / "shards")
    manifest, _ = shard_dataset(spark, raw, destination, num_shards=4, seed=0)
    indices = [sharding.read_shard(destination, shard).column("index").to_numpy() for shard in range(4)]
    everything = np.concatenate(indices)
    assert len(everything) == 50_000  # the training split: the file's last 10,000 are validation
    assert np.array_equal(np.sort(everything), np.arange(50_000))
    histograms = np.array([shard["class_histogram"] for shard in manifest["shards"]])
    assert histograms.sum(axis=0).tolist() == storage.require_manifest(raw)["splits"]["train"]["class_histogram"]
    assert (histograms.max(axis=0) - histograms.min(axis=0)).max() <= 1


@pytest.mark.parametrize(("shape", "dtype"), [((28, 28), "uint8"), ((98, 40), "float16"), ((1, 16000), "<i2")])
def test_binary_columns_round_trip_including_an_empty_split(shape, dtype):
    for count in (0, 3):
        images = np.arange(count * shape[0] * shape[1]).reshape(count, *shape).astype(dtype)
        column = binary_column(images)
        assert len(column) == count
        np.testing.assert_array_equal(pixels_of(column, shape, dtype), images)


def test_a_step_whose_dataset_is_published_starts_no_spark_and_one_with_work_does(spark, tmp_path, request,
                                                                                   caplog):
    """A retried augment or shard task (or a second DAG run on the same data) only reads the manifest: no Spark
    session, so no JVM and, on YARN, no application and executors. A step with work to do still starts one."""
    from pipeline_data import prepare_datasets

    from training.config import RunSpec
    from training.jobs import shard
    from training.workloads.mnist_elastic_cnn import augment_job as augment

    spec = RunSpec(train_limit=600, test_limit=100, augment_copies=1, workers_per_node=2, data_root=str(tmp_path))
    prepare_datasets(spark, spec)
    request.getfixturevalue("spark_forbidden")  # only now: preparing the data above needs Spark
    with caplog.at_level("INFO", logger="training"):
        assert augment.run_step(spec) == storage.require_manifest(spec.augmented_uri())["uri"]
        assert shard.run_step(spec) == storage.require_manifest(spec.shards_uri())["uri"]
    assert sum("already complete, nothing to do" in record.getMessage() for record in caplog.records) == 2
    other = spec.with_changes(workers_per_node=3)  # shards not published yet: Spark is needed
    with pytest.raises(AssertionError, match="a Spark session was started"):
        shard.run_step(other)
    assert storage.read_manifest(other.shards_uri()) is None
