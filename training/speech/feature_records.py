"""Speech features as an image dataset: one float16 time × frequency map per clip (kind
``speech-features``), in the index/copy/label/image rows every image dataset uses, so sharding and the
strategies treat it like MNIST. Written by training/speech/features_job.py; read here with pyarrow alone."""

from __future__ import annotations

import numpy as np

from training import sharding, storage
from training.datasets import image_records
from training.datasets.image_records import ImageBatch, from_table
from training.speech.constants import SPEECH_FEATURES

DATASET_KIND = SPEECH_FEATURES
FEATURE_DTYPE = "float16"  # half the bytes of float32; log-mel values need no more than 3 significant digits


def read_split(dataset: str, split: str) -> ImageBatch:
    """One split's features (n, frames, bands) float16 with labels, in a fixed order (by index, copy)."""
    manifest = storage.require_manifest(dataset, DATASET_KIND)
    table = storage.read_split_table(dataset, DATASET_KIND, split)
    batch = from_table(table, tuple(manifest["image_shape"]), manifest["image_dtype"])
    order = np.lexsort((batch.copy, batch.index))  # Spark writes parts in any order
    return ImageBatch(batch.images[order], batch.labels[order], batch.index[order], batch.copy[order])


# A Trainable's readers of a features dataset's shards and splits: (feature maps, int32 labels).
def _features(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
    return batch.images, batch.labels.astype(np.int32)


def load_shard(shards_uri: str, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    return _features(sharding.read_worker_images(shards_uri, rank, workers))


def load_split(dataset_uri: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    return _features(image_records.read_split(dataset_uri, split))
