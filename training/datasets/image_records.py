"""The Parquet row format shared by every image dataset: raw, augmented and sharded.

Columns: ``index`` (example id in the source split), ``copy`` (0 = original, k = k-th deformation),
``label`` and ``image`` (row-major uint8 pixels). Readers need only pyarrow and numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

IMAGE_SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64(), nullable=False),
        pa.field("copy", pa.int16(), nullable=False),
        pa.field("label", pa.int8(), nullable=False),
        pa.field("image", pa.binary(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ImageBatch:
    """Examples as arrays: images (n, height, width) uint8, labels (n,) int8, index (n,) int64, copy (n,) int16."""

    images: np.ndarray
    labels: np.ndarray
    index: np.ndarray
    copy: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def binary_column(images: np.ndarray) -> pa.Array:
    """Pack (n, h, w) uint8 images into one Arrow binary array without a Python loop."""
    count = len(images)
    pixels = np.ascontiguousarray(images, dtype=np.uint8).reshape(count, -1)
    width = pixels.shape[1]
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(pixels)])


def pixels_of(column: pa.Array | pa.ChunkedArray, shape: tuple[int, int]) -> np.ndarray:
    """Unpack an Arrow binary column of equally sized images into (n, h, w) uint8."""
    if isinstance(column, pa.ChunkedArray):
        chunks = [pixels_of(chunk, shape) for chunk in column.chunks]
        return np.concatenate(chunks) if chunks else np.empty((0, *shape), np.uint8)
    count = len(column)
    size = shape[0] * shape[1]
    if column.null_count:
        raise ValueError("image column holds nulls")
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + count + 1]
    if count and not np.all(np.diff(offsets) == size):
        raise ValueError(f"every image must hold {size} bytes ({shape[0]}x{shape[1]})")
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
    return data[offsets[0] : offsets[0] + count * size].reshape(count, *shape)


def to_table(batch: ImageBatch) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(batch.index, pa.int64()),
            pa.array(batch.copy, pa.int16()),
            pa.array(batch.labels, pa.int8()),
            binary_column(batch.images),
        ],
        schema=IMAGE_SCHEMA,
    )


def from_table(table: pa.Table, shape: tuple[int, int]) -> ImageBatch:
    missing = {"index", "copy", "label", "image"} - set(table.column_names)
    if missing:
        raise ValueError(f"not an image table: missing columns {sorted(missing)}")
    return ImageBatch(
        images=pixels_of(table.column("image"), shape),
        labels=table.column("label").to_numpy().astype(np.int8),
        index=table.column("index").to_numpy().astype(np.int64),
        copy=table.column("copy").to_numpy().astype(np.int16),
    )
