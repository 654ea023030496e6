"""The MNIST workload's heavy half (training environment): ingestion, the model and its input readers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from training import sharding
from training.datasets import image_records
from training.workload_definition import Trainable
from training.workloads.mnist_elastic_cnn import NUM_CLASSES

if TYPE_CHECKING:
    from training.config import RunSpec


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Validate the IDX files of the run's source and publish them as Parquet (train/validation/test)."""
    from training.workloads.mnist_elastic_cnn import idx

    return idx.ingest(spec.resolved_data_source(), spec.raw_uri(), overwrite, spec.train_limit, spec.test_limit)


def _as_inputs(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (n, rows, columns) → the model's layout (n, rows, columns, 1); scaling to [0, 1] happens in the model
    feed."""
    return batch.images[..., np.newaxis], batch.labels.astype(np.int32)


def load_shard(shards_uri: str, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    return _as_inputs(sharding.read_worker_images(shards_uri, rank, workers))


def load_split(dataset_uri: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    return _as_inputs(image_records.read_split(dataset_uri, split))


def trainable(spec: RunSpec) -> Trainable:
    from training.workloads.mnist_elastic_cnn.elastic_online import make_elastic_augmenter

    def build_model() -> Any:
        from training.workloads.mnist_elastic_cnn.model import simard_cnn

        return simard_cnn(convolutions_per_stage=spec.convolutions_per_stage, dense_units=spec.dense_units,
                          batch_norm=spec.batch_norm)

    return Trainable(name=spec.workload, num_classes=NUM_CLASSES, build_model=build_model,
                     load_shard=load_shard, load_split=load_split,
                     class_names=tuple(str(digit) for digit in range(NUM_CLASSES)),
                     augment_batch=(make_elastic_augmenter(spec.alpha, spec.sigma, spec.elastic_fraction,
                                                           spec.rotation_degrees, spec.scale_jitter,
                                                           spec.shift_pixels)
                                    if spec.online_elastic else None))
