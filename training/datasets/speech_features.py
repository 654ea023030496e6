"""Keyword-spotting features as an image dataset: one float16 time × frequency map per clip (kind
``speech-features``), in the index/copy/label/image rows every image dataset uses, so sharding and the
strategies treat it like MNIST. Written by training/jobs/features.py; read here with pyarrow alone."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from training import storage
from training.datasets.image_records import ImageBatch, from_table

DATASET_KIND = "speech-features"
FEATURE_DTYPE = "float16"  # half the bytes of float32; log-mel values need no more than 3 significant digits


def read_split(dataset: str, split: str) -> ImageBatch:
    """One split's features (n, frames, bands) float16 with labels, in a fixed order (by index, copy)."""
    manifest = storage.require_manifest(dataset, DATASET_KIND)
    if split not in manifest["splits"]:
        raise storage.DatasetError(f"{dataset}: no split {split!r} (has {sorted(manifest['splits'])})")
    where = storage.resolve(dataset)
    tables = []
    for name in sorted(name for name in manifest["files"] if name.startswith(f"{split}/")):
        with where.fs.open(f"{where.path}/{name}", "rb") as handle:
            tables.append(pq.read_table(handle))
    batch = from_table(pa.concat_tables(tables), tuple(manifest["image_shape"]), manifest["image_dtype"])
    order = np.lexsort((batch.copy, batch.index))  # Spark writes parts in any order
    return ImageBatch(batch.images[order], batch.labels[order], batch.index[order], batch.copy[order])
