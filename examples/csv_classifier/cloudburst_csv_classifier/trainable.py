"""The CSV classifier's heavy half (training environment): ingestion into the shared row format, the model, the
readers. No strategy appears here: Horovod, Downpour and averaging all train what :func:`trainable` returns."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from cloudburst_csv_classifier.table import SPLITS, parse_table, read_csv, split_rows
from training import sharding, storage
from training.datasets import image_records
from training.models.architecture import recorded
from training.workload_definition import Trainable

if TYPE_CHECKING:
    from training.config import RunSpec

KIND = "csv-table"
INGEST_VERSION = 1  # part of the recipe: a change to splitting or checking makes a new dataset, not a silent mix


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Check the CSV, split it by class with the run's seed and publish the splits: each row a (1, features)
    float32 "image" in the row format every step reads. Nothing is published when the file has a problem."""
    source = spec.resolved_data_source()
    # The recipe holds the content's digest: an edited file at the same path is a different dataset, refused
    # (--overwrite replaces it) rather than mixed up with the old splits.
    raw = read_csv(source)
    recipe = {"source_sha256": hashlib.sha256(raw).hexdigest(), "label_column": spec.label_column, "seed": spec.seed,
              "version": INGEST_VERSION}

    def write(staging: storage.Location) -> dict[str, Any]:
        table = parse_table(raw, source, spec.label_column)  # a problem leaves nothing published
        rows = split_rows(table.labels, spec.seed)
        batches = {split: image_records.ImageBatch(
            table.features[rows[split]][:, None, :], table.labels[rows[split]], rows[split].astype(np.int64),
            np.zeros(len(rows[split]), np.int16)) for split in SPLITS}
        for split, batch in batches.items():
            image_records.write_split(staging, split, batch)
        train = table.features[rows["train"]].astype(np.float64)
        return {"image_shape": [1, len(table.feature_names)], "image_dtype": "float32",
                "class_names": list(table.class_names), "feature_names": list(table.feature_names),
                # the model standardises with the training split's statistics (never validation's or test's)
                "feature_mean": train.mean(axis=0).tolist(), "feature_variance": train.var(axis=0).tolist(),
                "splits": {split: {"rows": len(batch), "class_histogram": np.bincount(
                    batch.labels, minlength=len(table.class_names)).tolist()} for split, batch in batches.items()}}

    return storage.publish(spec.raw_uri(), KIND, recipe, write, overwrite=overwrite)


@recorded  # a saved model is rebuilt by this builder from its recorded arguments: model files hold weights only
def build_model(features: int, classes: int, hidden_units: int, mean: list[float], variance: list[float]) -> Any:
    """Standardise with the training split's statistics, two hidden ReLU layers, logits."""
    import tensorflow as tf

    return tf.keras.Sequential([
        tf.keras.Input((1, features)),
        tf.keras.layers.Flatten(),
        # fixed mean and variance: constants, not weights, so every strategy (Downpour's trainable-only server
        # too) and the saved model's weights see the same plain dense network
        tf.keras.layers.Normalization(mean=list(mean), variance=list(variance)),
        tf.keras.layers.Dense(hidden_units, activation="relu"),
        tf.keras.layers.Dense(hidden_units, activation="relu"),
        tf.keras.layers.Dense(classes),
    ])


def _arrays(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
    return batch.images, batch.labels.astype(np.int32)


def trainable(spec: RunSpec) -> Trainable:
    manifest = image_records.require_records(spec.raw_uri())  # the statistics ingest recorded
    classes = len(manifest["class_names"])
    return Trainable(
        name=spec.workload, num_classes=classes,
        build_model=lambda: build_model(manifest["image_shape"][1], classes, spec.hidden_units,
                                        manifest["feature_mean"], manifest["feature_variance"]),
        load_shard=lambda uri, rank, workers: _arrays(sharding.read_worker_images(uri, rank, workers)),
        load_split=lambda uri, split: _arrays(image_records.read_split(uri, split)),
        class_names=tuple(manifest["class_names"]))
