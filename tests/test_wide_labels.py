"""Datasets with more than 128 classes (speaker classification): the label column widens to int16 from the class
count, through features and sharding, while MNIST and keyword spotting keep int8 and their bytes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from training import sharding, storage
from training.datasets import image_records
from training.jobs.spark_records import spark_image_schema
from training.speech import ingest as speech_ingest

CLASSES = 300


def test_the_class_count_decides_the_label_type():
    assert image_records.label_type(None) == pa.int8() and image_records.label_type(128) == pa.int8()
    assert image_records.label_type(129) == pa.int16() and image_records.label_type(32_768) == pa.int16()
    with pytest.raises(ValueError, match="at most 32768"):
        image_records.label_type(32_769)
    assert image_records.IMAGE_SCHEMA.field("label").type == pa.int8()  # MNIST's and keyword spotting's files
    assert spark_image_schema(10) == "index long, copy short, label byte, image binary"
    assert spark_image_schema(CLASSES) == "index long, copy short, label short, image binary"


def test_labels_round_trip_as_int16_and_never_wrap_in_an_int8_column():
    labels = np.array([0, 127, 128, 299], np.int16)
    batch = image_records.ImageBatch(np.zeros((4, 2, 3), np.uint8), labels, np.arange(4), np.zeros(4, np.int16))
    table = image_records.to_table(batch, CLASSES)
    back = image_records.from_table(table, (2, 3))
    assert back.labels.dtype == np.int16 and back.labels.tolist() == labels.tolist()
    with pytest.raises(pa.ArrowInvalid, match="not in range"):  # before: astype(np.int8) wrapped 200 to -56
        image_records.to_table(batch)


@pytest.fixture(scope="module")
def wide_clips(tmp_path_factory):
    """A clips dataset of 300 classes (one speaker each), as a speaker-classification ingest would publish it."""
    rng = np.random.default_rng(0)
    schema = pa.schema([field.with_type(pa.int16()) if field.name == "label" else field
                        for field in speech_ingest.CLIP_SCHEMA])
    destination = str(tmp_path_factory.mktemp("wide") / "clips")
    sizes = {"train": 2 * CLASSES, "validation": 40, "test": 40}

    def write(staging: storage.Location) -> dict:
        splits = {}
        start = 0
        for split, rows in sizes.items():
            labels = np.arange(rows) % CLASSES
            audio = (rng.normal(size=(rows, speech_ingest.CLIP_SAMPLES)) * 2000).astype("<i2")
            table = pa.Table.from_arrays(
                [pa.array(np.arange(start, start + rows), pa.int64()), pa.array(labels, pa.int16()),
                 pa.array(["word"] * rows), pa.array([f"s{label:03d}" for label in labels]),
                 pa.array([f"word/s{label:03d}_nohash_{n}.wav" for n, label in enumerate(labels)]),
                 image_records.binary_column(audio.reshape(rows, 1, -1))], schema=schema)
            staging.fs.makedirs(f"{staging.path}/{split}", exist_ok=True)
            with staging.fs.open(f"{staging.path}/{split}/part-00000.parquet", "wb") as handle:
                pq.write_table(table, handle)
            splits[split] = {"rows": rows, "class_histogram": np.bincount(labels, minlength=CLASSES).tolist()}
            start += rows
        noise = (rng.normal(size=2 * speech_ingest.CLIP_SAMPLES) * 500).astype("<i2")
        staging.fs.makedirs(f"{staging.path}/noise", exist_ok=True)
        with staging.fs.open(f"{staging.path}/noise/part-00000.parquet", "wb") as handle:
            pq.write_table(pa.Table.from_arrays([pa.array(["hum.wav"]), pa.array([noise.tobytes()], pa.binary())],
                                                schema=speech_ingest.NOISE_SCHEMA), handle)
        return {"class_names": [f"s{label:03d}" for label in range(CLASSES)], "task": 0, "splits": splits,
                "noise_files": ["hum.wav"]}

    storage.publish(destination, speech_ingest.DATASET_KIND, {"test": "wide labels"}, write)
    return destination


def test_features_and_shards_of_300_classes_keep_every_label(spark, wide_clips, tmp_path):
    from training.jobs.shard import shard_dataset
    from training.speech.features_job import features_dataset

    features = str(tmp_path / "features")
    manifest, _ = features_dataset(spark, wide_clips, features, "mfcc", copies=0)
    assert manifest["splits"]["train"]["class_histogram"] == [2] * CLASSES
    train = image_records.read_split(features, "train")
    assert train.labels.dtype == np.int16
    assert train.labels.tolist() == (np.arange(2 * CLASSES) % CLASSES).tolist()  # read in index order
    shards = str(tmp_path / "shards")
    shard_manifest, _ = shard_dataset(spark, features, shards, num_shards=2, seed=0)
    assert [shard["rows"] for shard in shard_manifest["shards"]] == [CLASSES, CLASSES]
    dealt = np.concatenate([sharding.read_worker_images(shards, rank, 2).labels for rank in range(2)])
    assert sorted(dealt.tolist()) == sorted(train.labels.tolist())
    assert all(histogram == [1] * CLASSES for histogram in
               (shard["class_histogram"] for shard in shard_manifest["shards"]))
