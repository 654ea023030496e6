"""Write MNIST IDX files for tests: valid ones from real rows, and malformed ones with any header."""

from __future__ import annotations

import gzip
import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from training.workloads.mnist_elastic_cnn.idx import IMAGES_MAGIC, LABELS_MAGIC


def idx_bytes(magic: int, dimensions: Sequence[int], payload: bytes = b"") -> bytes:
    """An IDX file with any header: ``magic``, one big-endian uint32 per dimension, then ``payload``."""
    return struct.pack(f">I{len(dimensions)}I", magic, *dimensions) + payload


def images_bytes(images: np.ndarray) -> bytes:
    """A valid IDX3 images file holding ``images`` (n, rows, cols) uint8."""
    images = np.ascontiguousarray(images, dtype=np.uint8)
    return idx_bytes(IMAGES_MAGIC, images.shape, images.tobytes())


def labels_bytes(labels: np.ndarray) -> bytes:
    """A valid IDX1 labels file holding ``labels`` (n,) as unsigned bytes."""
    labels = np.ascontiguousarray(labels, dtype=np.uint8)
    return idx_bytes(LABELS_MAGIC, labels.shape, labels.tobytes())


def gzip_bytes(data: bytes) -> bytes:
    """gzip with a fixed timestamp, so equal content gives equal bytes."""
    return gzip.compress(data, mtime=0)


def write_file(path: Path, data: bytes, gz: bool = True) -> Path:
    """Write ``data`` to ``path`` exactly as named; ``gz`` compresses it first (the name is not changed)."""
    path.write_bytes(gzip_bytes(data) if gz else data)
    return path


def write_idx_images(path: Path, images: np.ndarray, gz: bool = True) -> Path:
    return write_file(path, images_bytes(images), gz)


def write_idx_labels(path: Path, labels: np.ndarray, gz: bool = True) -> Path:
    return write_file(path, labels_bytes(labels), gz)


def write_sha256sums(directory: Path) -> Path:
    """(Re)write ``SHA256SUMS`` in ``sha256sum`` format for every other file in ``directory``."""
    sums = directory / "SHA256SUMS"
    lines = [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"
        for path in sorted(directory.iterdir())
        if path.is_file() and path.name != sums.name
    ]
    sums.write_text("".join(lines))
    return sums


def read_idx_head(path: Path, count: int) -> np.ndarray:
    """The first ``count`` items of a (gzip) IDX1 or IDX3 file, without decompressing the rest."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        magic, first_dimension = struct.unpack(">II", handle.read(8))
        dimensions = 3 if magic == IMAGES_MAGIC else 1
        item_shape = struct.unpack(f">{dimensions - 1}I", handle.read(4 * (dimensions - 1)))
        item_size = int(np.prod(item_shape, dtype=np.int64))
        if count > first_dimension:
            raise ValueError(f"{path}: holds {first_dimension} items, {count} requested")
        data = handle.read(count * item_size)
    return np.frombuffer(data, dtype=np.uint8).reshape(count, *item_shape)
