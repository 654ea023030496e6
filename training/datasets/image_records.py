"""The Parquet row format shared by every image dataset: raw, augmented and sharded.

Columns: ``index`` (example id in the source split), ``copy`` (0 = original, k = k-th augmented copy),
``label`` and ``image`` (the row-major array as raw bytes). Readers need only pyarrow and numpy.

An "image" is any fixed-shape 2-D array: uint8 pixels for MNIST, a float16 time × frequency map (log-mel or MFCC)
for keyword spotting. The dataset's manifest records ``image_shape`` and ``image_dtype`` (uint8 when absent).

``label`` is int8 for up to 128 classes (MNIST, keyword spotting: their files stay byte for byte as they were) and
int16 beyond (speaker classification: Speech Commands has 2,618 speakers); the class count decides, never the
values in one batch, so every part of a dataset has the same schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from training.storage import Location

MAX_INT8_CLASSES = 128  # labels 0-127
MAX_CLASSES = 32_768  # labels 0-32767 (int16)
ROWS_PER_FILE = 10_000  # write_split's part files


def label_type(num_classes: int | None = None) -> pa.DataType:
    """The label column's type for a dataset of ``num_classes`` classes (None: up to 128)."""
    if num_classes is None or num_classes <= MAX_INT8_CLASSES:
        return pa.int8()
    if num_classes > MAX_CLASSES:
        raise ValueError(f"{num_classes} classes: at most {MAX_CLASSES} fit the label column")
    return pa.int16()


def image_schema(num_classes: int | None = None) -> pa.Schema:
    return pa.schema(
        [
            pa.field("index", pa.int64(), nullable=False),
            pa.field("copy", pa.int16(), nullable=False),
            pa.field("label", label_type(num_classes), nullable=False),
            pa.field("image", pa.binary(), nullable=False),
        ]
    )


IMAGE_SCHEMA = image_schema()


@dataclass(frozen=True)
class ImageBatch:
    """Examples as arrays: images (n, height, width), labels (n,) int8 or int16, index (n,) int64, copy (n,)
    int16."""

    images: np.ndarray
    labels: np.ndarray
    index: np.ndarray
    copy: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def binary_column(images: np.ndarray) -> pa.Array:
    """Pack (n, h, w) arrays (any fixed-size dtype) into one Arrow binary array without a Python loop."""
    count = len(images)
    images = np.ascontiguousarray(images)
    width = int(np.prod(images.shape[1:])) * images.dtype.itemsize  # from the shape: an empty split has 0 rows
    pixels = images.reshape(count, width // images.dtype.itemsize).view(np.uint8)
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(pixels)])


def pixels_of(column: pa.Array | pa.ChunkedArray, shape: tuple[int, int], dtype: str = "uint8") -> np.ndarray:
    """Unpack an Arrow binary column of equally sized images into (n, h, w) of ``dtype``."""
    if isinstance(column, pa.ChunkedArray):
        chunks = [pixels_of(chunk, shape, dtype) for chunk in column.chunks]
        return np.concatenate(chunks) if chunks else np.empty((0, *shape), dtype)
    count = len(column)
    size = shape[0] * shape[1] * np.dtype(dtype).itemsize
    if column.null_count:
        raise ValueError("image column holds nulls")
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + count + 1]
    if count and not np.all(np.diff(offsets) == size):
        raise ValueError(f"every image must hold {size} bytes ({shape[0]}x{shape[1]})")
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
    return data[offsets[0] : offsets[0] + count * size].view(dtype).reshape(count, *shape)


def to_table(batch: ImageBatch, num_classes: int | None = None) -> pa.Table:
    schema = image_schema(num_classes)
    return pa.Table.from_arrays(
        [
            pa.array(batch.index, pa.int64()),
            pa.array(batch.copy, pa.int16()),
            pa.array(batch.labels, schema.field("label").type),
            binary_column(batch.images),
        ],
        schema=schema,
    )


def from_table(table: pa.Table, shape: tuple[int, int], dtype: str = "uint8") -> ImageBatch:
    missing = {"index", "copy", "label", "image"} - set(table.column_names)
    if missing:
        raise ValueError(f"not an image table: missing columns {sorted(missing)}")
    return ImageBatch(
        images=pixels_of(table.column("image"), shape, dtype),
        labels=table.column("label").to_numpy().astype(np.int16 if table.schema.field("label").type == pa.int16()
                                                        else np.int8),
        index=table.column("index").to_numpy().astype(np.int64),
        copy=table.column("copy").to_numpy().astype(np.int16),
    )


def write_split(staging: Location, split: str, batch: ImageBatch, rows_per_file: int = ROWS_PER_FILE) -> None:
    """Write a split into a dataset being published as fixed-size Parquet files named by position, so the bytes are
    reproducible."""
    import pyarrow.parquet as pq

    staging.fs.makedirs(f"{staging.path}/{split}", exist_ok=True)
    for part, start in enumerate(range(0, max(len(batch), 1), rows_per_file)):
        chunk = ImageBatch(*(column[start : start + rows_per_file] for column in
                             (batch.images, batch.labels, batch.index, batch.copy)))
        with staging.fs.open(f"{staging.path}/{split}/part-{part:05d}.parquet", "wb") as handle:
            pq.write_table(to_table(chunk), handle)


def require_records(dataset: str) -> dict:
    """The manifest of a dataset in this row format (raw or augmented MNIST, features, a workload's own kind);
    a clear error for anything else (clips, shards)."""
    from training import storage

    manifest = storage.require_manifest(dataset)
    if "image_shape" not in manifest or "train" not in manifest.get("splits", {}) \
            or "class_histogram" not in manifest["splits"]["train"]:
        raise storage.DatasetError(f"{dataset}: a {manifest.get('kind')!r} dataset does not hold index/copy/label/"
                                   "image rows with a train split; it cannot be sharded or trained on")
    return manifest


def read_split(dataset: str, split: str) -> ImageBatch:
    """One split of a dataset in this row format, in a fixed order (index, then copy) whatever order Spark wrote."""
    from training import storage

    manifest = require_records(dataset)
    table = storage.read_split_table(dataset, manifest["kind"], split)
    batch = from_table(table, tuple(manifest["image_shape"]), manifest.get("image_dtype", "uint8"))
    order = np.lexsort((batch.copy, batch.index))
    return ImageBatch(batch.images[order], batch.labels[order], batch.index[order], batch.copy[order])
