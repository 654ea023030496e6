"""The toy workload's heavy half: a generated dataset in the shared row format, and a tiny dense model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from training import sharding, storage
from training.datasets import image_records
from training.models.architecture import recorded
from training.workload_definition import Trainable

if TYPE_CHECKING:
    from training.config import RunSpec

SHAPE = (1, 8)
CLASSES = 3


def _blobs(count: int, seed: int) -> image_records.ImageBatch:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, count)
    centres = np.random.default_rng(1234).normal(0, 2.0, (CLASSES, SHAPE[1]))
    points = centres[labels] + rng.normal(0, 1.0, (count, SHAPE[1]))
    return image_records.ImageBatch(points.reshape(count, *SHAPE).astype(np.float16), labels.astype(np.int8),
                                    np.arange(count, dtype=np.int64), np.zeros(count, np.int16))


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    splits = {"train": _blobs(1200, spec.seed), "validation": _blobs(300, spec.seed + 2),
              "test": _blobs(300, spec.seed + 1)}

    def write(staging: storage.Location) -> dict[str, Any]:
        for split, batch in splits.items():
            image_records.write_split(staging, split, batch)
        return {"image_shape": list(SHAPE), "image_dtype": "float16", "class_names": ["a", "b", "c"],
                "splits": {split: {"rows": len(batch), "class_histogram": np.bincount(batch.labels, minlength=CLASSES)
                                   .tolist()} for split, batch in splits.items()}}

    return storage.publish(spec.raw_uri(), "toy-blobs", {"seed": spec.seed}, write, overwrite=overwrite)


@recorded  # a saved model is rebuilt by this builder: model files hold weights only (training.models.model_files)
def build_model() -> Any:
    import tensorflow as tf

    return tf.keras.Sequential([tf.keras.Input(SHAPE), tf.keras.layers.Flatten(),
                                tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(CLASSES)])


def _arrays(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
    return batch.images, batch.labels.astype(np.int32)


def trainable(spec: RunSpec) -> Trainable:
    return Trainable(
        name=spec.workload, num_classes=CLASSES, build_model=build_model,
        load_shard=lambda uri, rank, workers: _arrays(sharding.read_worker_images(uri, rank, workers)),
        load_split=lambda uri, split: _arrays(image_records.read_split(uri, split)),
        class_names=("a", "b", "c"))
