"""MNIST's IDX files: validate the four, ingest them into a Parquet dataset (train, validation, test), read splits
back.

The source may be a directory, the four file paths, or an http(s) base URL. Files may be gzip-compressed
(``.gz``) or raw. Every file is checked (a regular file, magic, dimensions, length, labels, gzip framing) and
checksummed before anything is written, so a bad input publishes nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training import local_files, storage
from training.contract import MNIST_IMAGES
from training.datasets import download
from training.datasets.image_records import ImageBatch, from_table, write_split
from training.workloads.mnist_elastic_cnn import IMAGE_SHAPE, NUM_CLASSES

log = logging.getLogger(__name__)

# The validation split is the training file's last 1/6: 10,000 of MNIST's 60,000 (Simard et al. 2003).
VALIDATION_SHARE_DENOMINATOR = 6
IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
DATASET_KIND = MNIST_IMAGES

# role → file stem, as published by the original MNIST site and every mirror.
FILE_STEMS = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
# sha256 of the uncompressed canonical files: verifies any mirror, whatever its gzip bytes.
CANONICAL_CONTENT_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
DOWNLOAD_TIMEOUT_SECONDS = 60
# The largest MNIST file, train-images-idx3-ubyte, is 47,040,016 bytes: no file may be read, download or decompress
# to more.
MAX_FILE_BYTES = 64 * 2**20
MAX_CHECKSUMS_BYTES = 2**20  # SHA256SUMS: four lines of ~90 bytes


class IdxError(storage.DatasetError):
    """An IDX file is malformed; the message names the file."""


@dataclass(frozen=True)
class SourceFile:
    """One fetched input file: where it came from and its bytes as stored (maybe gzip)."""

    name: str
    origin: str
    raw: bytes


def _decompress(source: SourceFile) -> bytes:
    if not source.raw:
        raise IdxError(f"{source.name}: empty file")
    if source.name.endswith(".gz"):
        if source.raw[:2] != b"\x1f\x8b":
            raise IdxError(f"{source.name}: not gzip data although the name ends in .gz")
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(source.raw)) as stream:
                data = stream.read(MAX_FILE_BYTES + 1)  # reads every gzip member to its end, checking each CRC
        except (EOFError, OSError, zlib.error) as error:
            raise IdxError(f"{source.name}: corrupt or truncated gzip stream ({error})") from error
        if len(data) > MAX_FILE_BYTES:
            raise IdxError(f"{source.name}: decompresses to more than {MAX_FILE_BYTES} bytes (no MNIST file does)")
        return data
    return source.raw


def _header(name: str, data: bytes, expected_magic: int, dimensions: int) -> tuple[int, ...]:
    if not data:
        raise IdxError(f"{name}: empty file")
    header_bytes = 4 + 4 * dimensions
    if len(data) < header_bytes:
        raise IdxError(f"{name}: truncated header ({len(data)} bytes, need {header_bytes})")
    (magic,) = struct.unpack(">I", data[:4])
    if magic != expected_magic:
        other = {IMAGES_MAGIC: "an images file", LABELS_MAGIC: "a labels file"}.get(magic, "not an MNIST IDX file")
        raise IdxError(f"{name}: expected magic {expected_magic}, found {magic} ({other}?)")
    return struct.unpack(f">{dimensions}I", data[4:header_bytes])


def parse_images(name: str, data: bytes) -> np.ndarray:
    """Validate an IDX3 images file and return (n, rows, columns) uint8 (IMAGE_SHAPE)."""
    count, rows, cols = _header(name, data, IMAGES_MAGIC, 3)
    if (rows, cols) != IMAGE_SHAPE:
        raise IdxError(f"{name}: expected {IMAGE_SHAPE[0]}x{IMAGE_SHAPE[1]} images, found {rows}x{cols}")
    expected = 16 + count * rows * cols
    if len(data) < expected:
        raise IdxError(f"{name}: truncated data: header says {count} images ({expected} bytes), file has {len(data)}")
    if len(data) > expected:
        raise IdxError(f"{name}: {len(data) - expected} unexpected bytes after {count} images")
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, rows, cols)


def parse_labels(name: str, data: bytes) -> np.ndarray:
    """Validate an IDX1 labels file and return (n,) int8 with values below NUM_CLASSES."""
    (count,) = _header(name, data, LABELS_MAGIC, 1)
    expected = 8 + count
    if len(data) < expected:
        raise IdxError(f"{name}: truncated data: header says {count} labels ({expected} bytes), file has {len(data)}")
    if len(data) > expected:
        raise IdxError(f"{name}: {len(data) - expected} unexpected bytes after {count} labels")
    labels = np.frombuffer(data, dtype=np.uint8, offset=8)
    bad = np.flatnonzero(labels >= NUM_CLASSES)
    if bad.size:
        raise IdxError(f"{name}: label {labels[bad[0]]} at position {bad[0]} is outside 0–{NUM_CLASSES - 1} "
                       f"({bad.size} such labels)")
    return labels.astype(np.int8)


def _stem_of(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def _fetch_url(url: str, max_bytes: int | None = None) -> bytes | None:
    """The bytes at ``url`` (at most ``max_bytes``, MAX_FILE_BYTES by default), or None if the server has no such
    file."""
    buffer = io.BytesIO()
    fetched = download.download(url, buffer, max_bytes=MAX_FILE_BYTES if max_bytes is None else max_bytes,
                                timeout_seconds=DOWNLOAD_TIMEOUT_SECONDS, missing_ok=True)
    return None if fetched is None else buffer.getvalue()


def _from_url(base_url: str) -> tuple[dict[str, SourceFile], dict[str, str]]:
    files: dict[str, SourceFile] = {}
    for stem in FILE_STEMS.values():
        for name in (f"{stem}.gz", stem):
            url = f"{base_url.rstrip('/')}/{name}"
            raw = _fetch_url(url)
            if raw is not None:
                files[stem] = SourceFile(name, url, raw)
                break
        else:
            raise storage.DatasetError(f"{base_url}: neither {stem}.gz nor {stem} found")
    sums_url = f"{base_url.rstrip('/')}/SHA256SUMS"
    sums = _fetch_url(sums_url, MAX_CHECKSUMS_BYTES)
    return files, parse_checksums_file(sums, sums_url) if sums is not None else {}


def _read_local(path: Path, max_bytes: int | None = None, what: str = "dataset file") -> bytes | None:
    """A local file's bytes, None if nothing has its name; refused unless it is a regular file of at most
    ``max_bytes`` (MAX_FILE_BYTES by default): a FIFO would block the read for good, a device read without end."""
    if not os.path.lexists(path):
        return None
    try:
        return local_files.read_regular_file(path, MAX_FILE_BYTES if max_bytes is None else max_bytes, what)
    except local_files.UnreadableFileError as error:
        raise storage.DatasetError(str(error)) from None


def _local_checksums(sums_file: Path) -> dict[str, str]:
    """The checksums of a local SHA256SUMS; {} where there is none."""
    raw = _read_local(sums_file, MAX_CHECKSUMS_BYTES, "checksums file")
    return parse_checksums_file(raw, str(sums_file)) if raw is not None else {}


def _from_directory(directory: Path) -> tuple[dict[str, SourceFile], dict[str, str]]:
    files: dict[str, SourceFile] = {}
    for stem in FILE_STEMS.values():
        for name in (f"{stem}.gz", stem):
            raw = _read_local(directory / name)
            if raw is not None:
                files[stem] = SourceFile(name, str(directory / name), raw)
                break
        else:
            raise storage.DatasetError(f"{directory}: neither {stem}.gz nor {stem} found")
    return files, _local_checksums(directory / "SHA256SUMS")


def _from_hdfs(uri: str) -> tuple[dict[str, SourceFile], dict[str, str]]:
    """The four files (and SHA256SUMS, if there) from a directory on HDFS — a landing zone — over WebHDFS."""
    where = storage.resolve(uri)
    if not where.fs.isdir(where.path):
        raise storage.DatasetError(f"{uri}: no such directory on HDFS")

    def read(name: str) -> bytes | None:
        path = f"{where.path.rstrip('/')}/{name}"
        if not where.fs.isfile(path):
            return None
        if where.fs.size(path) > MAX_FILE_BYTES:
            raise storage.DatasetError(f"{uri}/{name}: larger than {MAX_FILE_BYTES} bytes (no MNIST file is)")
        with where.fs.open(path, "rb") as handle:
            return handle.read()

    files: dict[str, SourceFile] = {}
    for stem in FILE_STEMS.values():
        for name in (f"{stem}.gz", stem):
            raw = read(name)
            if raw is not None:
                files[stem] = SourceFile(name, f"{uri.rstrip('/')}/{name}", raw)
                break
        else:
            raise storage.DatasetError(f"{uri}: neither {stem}.gz nor {stem} found")
    sums = read("SHA256SUMS")
    return files, parse_checksums_file(sums, f"{uri.rstrip('/')}/SHA256SUMS") if sums is not None else {}


def _from_paths(paths: Sequence[str]) -> dict[str, SourceFile]:
    files: dict[str, SourceFile] = {}
    known = set(FILE_STEMS.values())
    for path in map(Path, paths):
        stem = _stem_of(path.name)
        if stem not in known:
            names = ", ".join(sorted(known))
            raise storage.DatasetError(f"{path}: not one of the MNIST files ({names}, optionally .gz)")
        raw = _read_local(path)
        if raw is None:
            raise storage.DatasetError(f"{path}: no such file")
        files[stem] = SourceFile(path.name, str(path), raw)
    missing = known - files.keys()
    if missing:
        raise storage.DatasetError(f"missing MNIST files: {', '.join(sorted(missing))}")
    return files


def parse_checksums_file(raw: bytes, origin: str) -> dict[str, str]:
    """A SHA256SUMS file's checksums (UTF-8, a byte-order mark dropped); a storage.DatasetError naming ``origin``
    if it is not ``sha256sum`` output."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise storage.DatasetError(f"{origin}: not UTF-8 text (byte {error.start}); it must hold sha256sum output, "
                                   "'HEX  NAME' per line") from None
    return parse_checksums(text, origin)


def parse_checksums(text: str, origin: str = "SHA256SUMS") -> dict[str, str]:
    """Parse ``sha256sum`` output (``HEX  NAME`` per line) into name → hex."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            fields = line.split(maxsplit=1)
            if len(fields) != 2:
                raise storage.DatasetError(f"{origin}: line {number} is not 'HEX  NAME' (sha256sum output)")
            sums[fields[1].strip().lstrip("*")] = fields[0].lower()
    return sums


def fetch_sources(source: str | Sequence[str]) -> dict[str, SourceFile]:
    """Fetch the four files from a directory, four paths or a base URL, verifying checksums.

    A file is accepted when its sha256 (as stored, or of its uncompressed content) matches the checksum
    given for it — from SHA256SUMS beside the files, or the canonical MNIST content for a URL.
    """
    sources = [source] if isinstance(source, str) else list(source)
    checksums: dict[str, str] = {}
    if len(sources) == 1 and sources[0].startswith(("http://", "https://")):
        files, checksums = _from_url(sources[0])
        checksums = {**{name: digest for name, digest in CANONICAL_CONTENT_SHA256.items()}, **checksums}
    elif len(sources) == 1 and sources[0].startswith("hdfs://"):
        files, checksums = _from_hdfs(sources[0])
    elif len(sources) == 1 and Path(sources[0]).is_dir():
        files, checksums = _from_directory(Path(sources[0]))
    elif len(sources) == 1:
        raise storage.DatasetError(f"{sources[0]}: not a directory, nor an http(s) URL; or give the four file paths")
    else:
        files = _from_paths(sources)
        beside = {Path(path).parent / "SHA256SUMS" for path in sources}
        for sums_file in sorted(beside):
            checksums.update(_local_checksums(sums_file))
    for stem, source_file in files.items():
        _verify_checksum(source_file, checksums.get(source_file.name) or checksums.get(stem))
    return files


def _verify_checksum(source_file: SourceFile, expected: str | None) -> None:
    """The file's sha256 as stored, or of its uncompressed content, must be ``expected`` (if a checksum is given)."""
    if expected is None:
        return
    candidates = {hashlib.sha256(source_file.raw).hexdigest()}
    if source_file.name.endswith(".gz"):
        candidates.add(hashlib.sha256(_decompress(source_file)).hexdigest())
    download.check_sha256(source_file.name, candidates, expected, source_file.origin)


def load(source: str | Sequence[str]) -> tuple[dict[str, ImageBatch], dict[str, str]]:
    """Fetch, verify and parse all four files; returns split → batch and stem → content sha256."""
    files = fetch_sources(source)
    content_sha256: dict[str, str] = {}
    splits: dict[str, ImageBatch] = {}
    for split in ("train", "test"):
        images_file = files[FILE_STEMS[(split, "images")]]
        labels_file = files[FILE_STEMS[(split, "labels")]]
        images_data, labels_data = _decompress(images_file), _decompress(labels_file)
        images = parse_images(images_file.name, images_data)
        labels = parse_labels(labels_file.name, labels_data)
        if len(images) != len(labels):
            raise IdxError(
                f"{images_file.name} holds {len(images)} images but {labels_file.name} holds {len(labels)} labels"
            )
        content_sha256[_stem_of(images_file.name)] = hashlib.sha256(images_data).hexdigest()
        content_sha256[_stem_of(labels_file.name)] = hashlib.sha256(labels_data).hexdigest()
        count = len(labels)
        splits[split] = ImageBatch(
            images=images, labels=labels, index=np.arange(count, dtype=np.int64), copy=np.zeros(count, np.int16)
        )
    return splits, content_sha256


def class_histogram(labels: np.ndarray) -> list[int]:
    return np.bincount(labels.astype(np.int64), minlength=NUM_CLASSES).tolist()


def _rows(batch: ImageBatch, rows: slice) -> ImageBatch:
    return ImageBatch(*(column[rows] for column in (batch.images, batch.labels, batch.index, batch.copy)))


def with_validation_split(splits: dict[str, ImageBatch]) -> dict[str, ImageBatch]:
    """The training file's last sixth becomes the validation split (MNIST: images 50,000–59,999, as Simard et al.
    2003 held out 10,000 of the 60,000), the rest stays for training; each row keeps its index in the training file,
    so the two are disjoint by index. The test split (t10k) is kept apart for the one final evaluation."""
    train = splits["train"]
    validation_rows = round(len(train) / VALIDATION_SHARE_DENOMINATOR)
    first_validation = len(train) - validation_rows
    return {"train": _rows(train, slice(0, first_validation)),
            "validation": _rows(train, slice(first_validation, None)), "test": splits["test"]}


def ingest(
    source: str | Sequence[str],
    destination: str,
    overwrite: bool = False,
    train_limit: int = 0,
    test_limit: int = 0,
) -> tuple[dict[str, Any], bool]:
    """Validate MNIST from ``source`` and publish it as Parquet at ``destination``: train, validation (the training
    file's last sixth) and test; (manifest, created).

    ``train_limit`` > 0 keeps only the first N training images, ``test_limit`` > 0 the first N of the validation
    and of the test split (quick runs and tests).
    """
    for name, limit in (("train_limit", train_limit), ("test_limit", test_limit)):
        if int(limit) != limit or limit < 0:
            raise ValueError(f"{name} must be an integer ≥ 0, got {limit}")
    loaded, content_sha256 = load(source)
    splits = with_validation_split(loaded)
    for split, limit in (("train", train_limit), ("validation", test_limit), ("test", test_limit)):
        if limit:
            splits[split] = _rows(splits[split], slice(0, limit))
    recipe = {"source_content_sha256": content_sha256, "train_limit": train_limit, "test_limit": test_limit,
              "validation": f"last 1/{VALIDATION_SHARE_DENOMINATOR} of the training file"}

    def write(staging: storage.Location) -> dict[str, Any]:
        for split, batch in splits.items():
            log.info("writing %s: %d images", split, len(batch))
            write_split(staging, split, batch)
        return {
            "source": source if isinstance(source, str) else list(source),
            "image_shape": list(IMAGE_SHAPE),
            "splits": {
                split: {"rows": len(batch), "class_histogram": class_histogram(batch.labels)}
                for split, batch in splits.items()
            },
        }

    return storage.publish(destination, DATASET_KIND, recipe, write, overwrite=overwrite)


def read_split(dataset: str, split: str) -> ImageBatch:
    """Read one split of a published image dataset with pyarrow alone."""
    manifest = storage.require_manifest(dataset, DATASET_KIND)
    return from_table(storage.read_split_table(dataset, DATASET_KIND, split), tuple(manifest["image_shape"]))
