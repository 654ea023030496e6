"""MNIST ingestion: a malformed input is rejected naming the file; good input is published once, atomically.

Bad inputs are built from the first rows of the real MNIST (see ``small_idx_dir``); the full vendored copy is
ingested once per module, from its directory and over a real local HTTP server.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import logging
import os
import re
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from idx_files import (
    gzip_bytes,
    idx_bytes,
    images_bytes,
    labels_bytes,
    read_idx_head,
    write_file,
    write_idx_images,
    write_idx_labels,
    write_sha256sums,
)

import training
from training import cli, storage
from training.datasets import download, image_records
from training.workloads.mnist_elastic_cnn import idx

TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
FILE_NAMES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)

# Published counts for the canonical MNIST (LeCun et al.), independent of this code.
# The training file's first 50,000 (train) and last 10,000 (validation) labels, per digit.
REAL_TRAIN_HISTOGRAM = [4932, 5678, 4968, 5101, 4859, 4506, 4951, 5175, 4842, 4988]
REAL_VALIDATION_HISTOGRAM = [991, 1064, 990, 1030, 983, 915, 967, 1090, 1009, 961]
REAL_TEST_HISTOGRAM = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


# --- Helpers -----------------------------------------------------------------------------------------------


@pytest.fixture
def destination(tmp_path) -> Path:
    """Where a test publishes: inside an existing, empty parent, so leftovers there are visible."""
    parent = tmp_path / "datasets"
    parent.mkdir()
    return parent / "mnist"


def assert_nothing_published(destination: Path) -> None:
    assert not destination.exists()
    assert list(destination.parent.glob(f".{destination.name}.tmp-*")) == []


def assert_no_staging_left(destination: Path) -> None:
    assert list(destination.parent.glob(f".{destination.name}.tmp-*")) == []


def files_state(destination: Path) -> dict[str, tuple[int, int]]:
    """Relative path → (inode, mtime_ns) of every file below ``destination``."""
    return {
        str(path.relative_to(destination)): (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in sorted(destination.rglob("*"))
        if path.is_file()
    }


def replace_file(directory: Path, name: str, data: bytes, gz: bool = True) -> None:
    """Replace one source file and refresh SHA256SUMS, so a structural check (not the checksum) must fail."""
    write_file(directory / name, data, gz)
    write_sha256sums(directory)


def write_small_mnist(directory: Path, head: dict, train_rows: int, gz: bool = True) -> Path:
    """A valid MNIST directory holding the first ``train_rows`` training rows of ``head``."""
    directory.mkdir()
    suffix = ".gz" if gz else ""
    images, labels = head["train"]
    write_idx_images(directory / f"train-images-idx3-ubyte{suffix}", images[:train_rows], gz)
    write_idx_labels(directory / f"train-labels-idx1-ubyte{suffix}", labels[:train_rows], gz)
    images, labels = head["test"]
    write_idx_images(directory / f"t10k-images-idx3-ubyte{suffix}", images, gz)
    write_idx_labels(directory / f"t10k-labels-idx1-ubyte{suffix}", labels, gz)
    write_sha256sums(directory)
    return directory


def ingest_cli(source: str, data_root: Path | None = None) -> int:
    """``cloudburst ingest`` as a user runs it; it publishes to <data root>/mnist/raw-val."""
    return cli.main(["ingest", "--data-source", source, *(["--data-root", str(data_root)] if data_root else [])])


def error_messages(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


# --- Bad inputs: each damages one file of a valid small MNIST and returns the expected message -------------


def labels_file_holds_images(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_LABELS, images_bytes(head["train"][0]))
    return f"{TRAIN_LABELS}: expected magic 2049, found 2051 (an images file?)"


def images_file_holds_labels(directory: Path, head: dict) -> str:
    replace_file(directory, TEST_IMAGES, labels_bytes(head["test"][1]))
    return f"{TEST_IMAGES}: expected magic 2051, found 2049 (a labels file?)"


def images_file_has_unknown_magic(directory: Path, head: dict) -> str:
    float_images_magic = 0x0D03
    replace_file(directory, TRAIN_IMAGES, idx_bytes(float_images_magic, (50, 28, 28), bytes(50 * 784)))
    return f"{TRAIN_IMAGES}: expected magic 2051, found 3331 (not an MNIST IDX file?)"


def images_are_32x32(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_IMAGES, idx_bytes(idx.IMAGES_MAGIC, (50, 32, 32), bytes(50 * 32 * 32)))
    return f"{TRAIN_IMAGES}: expected 28x28 images, found 32x32"


def images_data_truncated(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_IMAGES, images_bytes(head["train"][0])[:-100])
    return f"{TRAIN_IMAGES}: truncated data: header says 50 images (39216 bytes), file has 39116"


def labels_data_truncated(directory: Path, head: dict) -> str:
    replace_file(directory, TEST_LABELS, labels_bytes(head["test"][1])[:-5])
    return f"{TEST_LABELS}: truncated data: header says 20 labels (28 bytes), file has 23"


def labels_header_truncated(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_LABELS, labels_bytes(head["train"][1])[:6])
    return f"{TRAIN_LABELS}: truncated header (6 bytes, need 8)"


def trailing_bytes_after_images(directory: Path, head: dict) -> str:
    replace_file(directory, TEST_IMAGES, images_bytes(head["test"][0]) + b"\x00\x00\x00")
    return f"{TEST_IMAGES}: 3 unexpected bytes after 20 images"


def trailing_bytes_after_labels(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_LABELS, labels_bytes(head["train"][1]) + b"\x07")
    return f"{TRAIN_LABELS}: 1 unexpected bytes after 50 labels"


def fewer_labels_than_images(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_LABELS, labels_bytes(head["train"][1][:49]))
    return f"{TRAIN_IMAGES} holds 50 images but {TRAIN_LABELS} holds 49 labels"


def label_outside_0_to_9(directory: Path, head: dict) -> str:
    labels = head["test"][1].copy()
    labels[7], labels[12] = 10, 255
    replace_file(directory, TEST_LABELS, labels_bytes(labels))
    return f"{TEST_LABELS}: label 10 at position 7 is outside 0–9 (2 such labels)"


def gz_name_but_not_gzip(directory: Path, head: dict) -> str:
    replace_file(directory, TRAIN_IMAGES, images_bytes(head["train"][0]), gz=False)
    return f"{TRAIN_IMAGES}: not gzip data although the name ends in .gz"


def gzip_stream_truncated(directory: Path, head: dict) -> str:
    compressed = gzip_bytes(images_bytes(head["train"][0]))
    replace_file(directory, TRAIN_IMAGES, compressed[: len(compressed) // 2], gz=False)
    return f"{TRAIN_IMAGES}: corrupt or truncated gzip stream"


def gzip_checksum_corrupted(directory: Path, head: dict) -> str:
    compressed = bytearray(gzip_bytes(labels_bytes(head["test"][1])))
    compressed[-8] ^= 0xFF  # first byte of the gzip trailer's CRC32
    replace_file(directory, TEST_LABELS, bytes(compressed), gz=False)
    return f"{TEST_LABELS}: corrupt or truncated gzip stream"


def gz_file_empty(directory: Path, head: dict) -> str:
    replace_file(directory, TEST_LABELS, b"", gz=False)
    return f"{TEST_LABELS}: empty file"


def uncompressed_file_empty(directory: Path, head: dict) -> str:
    (directory / TEST_IMAGES).unlink()
    replace_file(directory, "t10k-images-idx3-ubyte", b"", gz=False)
    return "t10k-images-idx3-ubyte: empty file"


def file_missing(directory: Path, head: dict) -> str:
    (directory / TEST_LABELS).unlink()
    write_sha256sums(directory)
    return f"{directory}: neither t10k-labels-idx1-ubyte.gz nor t10k-labels-idx1-ubyte found"


def gz_file_is_a_fifo(directory: Path, head: dict) -> str:
    (directory / TRAIN_IMAGES).unlink()
    os.mkfifo(directory / TRAIN_IMAGES)
    return f"{directory / TRAIN_IMAGES}: a FIFO, not a regular file; only regular files are read"


def raw_file_is_a_link_to_a_device(directory: Path, head: dict) -> str:
    (directory / TEST_IMAGES).unlink()
    (directory / "t10k-images-idx3-ubyte").symlink_to("/dev/zero")
    return f"{directory / 't10k-images-idx3-ubyte'}: a character device, not a regular file"


def gz_file_is_a_directory(directory: Path, head: dict) -> str:
    (directory / TEST_LABELS).unlink()
    (directory / TEST_LABELS).mkdir()
    return f"{directory / TEST_LABELS}: a directory, not a regular file"


def sha256sums_is_a_fifo(directory: Path, head: dict) -> str:
    (directory / "SHA256SUMS").unlink()
    os.mkfifo(directory / "SHA256SUMS")
    return f"{directory / 'SHA256SUMS'}: a FIFO, not a regular file"


def sha256sums_line_without_a_name(directory: Path, head: dict) -> str:
    with (directory / "SHA256SUMS").open("a") as out:
        out.write("0123abcd\n")
    return f"{directory / 'SHA256SUMS'}: line 5 is not 'HEX  NAME' (sha256sum output)"


def sha256sums_not_utf8(directory: Path, head: dict) -> str:
    with (directory / "SHA256SUMS").open("ab") as out:
        out.write(b"0123abcd  caf\xe9\n")
    return f"{directory / 'SHA256SUMS'}: not UTF-8 text (byte "


def sha256_differs_from_sha256sums(directory: Path, head: dict) -> str:
    expected = hashlib.sha256((directory / TRAIN_LABELS).read_bytes()).hexdigest()
    write_idx_labels(directory / TRAIN_LABELS, head["train"][1][::-1])  # valid, but not what SHA256SUMS says
    return f"{TRAIN_LABELS}: sha256 mismatch (expected {expected}, got "


BAD_INPUTS = [
    labels_file_holds_images,
    images_file_holds_labels,
    images_file_has_unknown_magic,
    images_are_32x32,
    images_data_truncated,
    labels_data_truncated,
    labels_header_truncated,
    trailing_bytes_after_images,
    trailing_bytes_after_labels,
    fewer_labels_than_images,
    label_outside_0_to_9,
    gz_name_but_not_gzip,
    gzip_stream_truncated,
    gzip_checksum_corrupted,
    gz_file_empty,
    uncompressed_file_empty,
    file_missing,
    sha256_differs_from_sha256sums,
    gz_file_is_a_fifo,
    raw_file_is_a_link_to_a_device,
    gz_file_is_a_directory,
    sha256sums_is_a_fifo,
    sha256sums_line_without_a_name,
    sha256sums_not_utf8,
]


@pytest.mark.timeout(120)  # a FIFO read would block for good
@pytest.mark.parametrize("damage", BAD_INPUTS, ids=lambda damage: damage.__name__)
def test_bad_input_is_rejected_naming_the_file_and_nothing_is_published(
    damage: Callable, small_idx_dir, mnist_head, destination
):
    expected = damage(small_idx_dir, mnist_head)
    with pytest.raises(storage.DatasetError) as raised:
        idx.ingest(str(small_idx_dir), str(destination))
    assert expected in str(raised.value)
    assert_nothing_published(destination)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damage", BAD_INPUTS, ids=lambda damage: damage.__name__)
def test_cli_exits_2_logging_what_is_wrong_and_publishes_nothing(
    damage: Callable, small_idx_dir, mnist_head, destination, caplog
):
    expected = damage(small_idx_dir, mnist_head)
    assert ingest_cli(str(small_idx_dir), data_root=destination) == 2
    assert any(expected in message for message in error_messages(caplog)), error_messages(caplog)
    assert_nothing_published(destination / "mnist" / "raw")
    assert not (destination / "mnist" / "raw").exists()


def test_sha256_mismatch_names_where_the_file_came_from(small_idx_dir, mnist_head, destination):
    sha256_differs_from_sha256sums(small_idx_dir, mnist_head)
    with pytest.raises(download.ChecksumError, match=f"from {re.escape(str(small_idx_dir / TRAIN_LABELS))}$"):
        idx.ingest(str(small_idx_dir), str(destination))
    assert_nothing_published(destination)


def test_source_that_is_neither_directory_nor_url_is_rejected(tmp_path, destination):
    nowhere = tmp_path / "no-such-directory"
    expected = f"^{re.escape(str(nowhere))}: not a directory, nor an http"
    with pytest.raises(storage.DatasetError, match=expected):
        idx.ingest(str(nowhere), str(destination))
    assert_nothing_published(destination)


# --- Accepted forms of the source --------------------------------------------------------------------------


def test_small_valid_directory_is_published_with_its_exact_rows(small_idx_dir, mnist_head, destination):
    manifest, created = idx.ingest(str(small_idx_dir), str(destination))
    assert created
    assert [manifest["splits"][split]["rows"] for split in ("train", "validation", "test")] == [42, 8, 20]
    train_images, train_labels = mnist_head["train"]
    expected = {"train": (train_images[:42], train_labels[:42], np.arange(42)),  # the last sixth validates
                "validation": (train_images[42:], train_labels[42:], np.arange(42, 50)),
                "test": (*mnist_head["test"], np.arange(20))}
    for split, (images, labels, index) in expected.items():
        batch = idx.read_split(str(destination), split)
        assert np.array_equal(batch.images, images)
        assert np.array_equal(batch.labels, labels)
        assert np.array_equal(batch.index, index)
        assert not batch.copy.any()
        assert manifest["splits"][split]["class_histogram"] == np.bincount(labels, minlength=10).tolist()
    assert_no_staging_left(destination)


def test_four_explicit_paths_are_accepted_in_any_order(small_idx_dir, mnist_head, destination):
    paths = [str(small_idx_dir / name) for name in (TEST_LABELS, TRAIN_IMAGES, TEST_IMAGES, TRAIN_LABELS)]
    manifest, created = idx.ingest(paths, str(destination))
    assert created
    assert manifest["source"] == paths
    assert np.array_equal(idx.read_split(str(destination), "train").labels, mnist_head["train"][1][:42])
    assert np.array_equal(idx.read_split(str(destination), "test").images, mnist_head["test"][0])


def test_explicit_paths_are_validated_like_a_directory(small_idx_dir, mnist_head, destination):
    replace_file(small_idx_dir, TRAIN_IMAGES, images_bytes(mnist_head["train"][0]) + b"\x01")
    with pytest.raises(idx.IdxError, match=f"^{TRAIN_IMAGES}: 1 unexpected bytes after 50 images"):
        idx.ingest([str(small_idx_dir / name) for name in FILE_NAMES], str(destination))
    assert_nothing_published(destination)


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        pytest.param(FILE_NAMES[:3], "missing MNIST files: t10k-labels-idx1-ubyte", id="three-paths"),
        pytest.param((*FILE_NAMES[:3], "labels.gz"), "labels.gz: not one of the MNIST files",
                     id="unknown-name"),
        pytest.param((*FILE_NAMES[:3], "t10k-labels-idx1-ubyte"), "t10k-labels-idx1-ubyte: no such file",
                     id="missing-file"),
    ],
)
def test_explicit_paths_must_be_the_four_mnist_files(paths, expected, small_idx_dir, destination):
    with pytest.raises(storage.DatasetError, match=expected):
        idx.ingest([str(small_idx_dir / name) for name in paths], str(destination))
    assert_nothing_published(destination)


@pytest.mark.timeout(60)
def test_an_explicit_path_that_is_a_fifo_is_refused_unopened(small_idx_dir, destination):
    fifo = small_idx_dir / "elsewhere" / TEST_LABELS
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    paths = [str(small_idx_dir / name) for name in FILE_NAMES[:3]] + [str(fifo)]
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(str(fifo))}: a FIFO, not a regular file"):
        idx.ingest(paths, str(destination))
    assert_nothing_published(destination)


def test_an_uncompressed_file_larger_than_any_mnist_file_is_refused_unread(tmp_path, mnist_head, destination,
                                                                          monkeypatch):
    source = write_small_mnist(tmp_path / "raw-files", mnist_head, train_rows=50, gz=False)
    monkeypatch.setattr(idx, "MAX_FILE_BYTES", 20_000)  # the small train images are 39,216 bytes
    expected = f"^{re.escape(str(source / 'train-images-idx3-ubyte'))}: 39,216 bytes, more than the 20,000 a "
    with pytest.raises(storage.DatasetError, match=expected):
        idx.ingest(str(source), str(destination))
    assert_nothing_published(destination)


def test_sha256sums_saved_with_a_byte_order_mark_and_crlf_still_verify(small_idx_dir, destination):
    sums = small_idx_dir / "SHA256SUMS"
    sums.write_bytes(b"\xef\xbb\xbf" + sums.read_bytes().replace(b"\n", b"\r\n"))
    assert idx.fetch_sources(str(small_idx_dir)).keys() == set(idx.FILE_STEMS.values())
    (small_idx_dir / TRAIN_IMAGES).write_bytes(gzip_bytes(images_bytes(np.zeros((50, 28, 28), np.uint8))))
    with pytest.raises(download.ChecksumError, match=f"^{TRAIN_IMAGES}: sha256 mismatch"):  # still checked
        idx.ingest(str(small_idx_dir), str(destination))
    assert_nothing_published(destination)


def test_uncompressed_idx_files_are_accepted(tmp_path, mnist_head, destination):
    source = write_small_mnist(tmp_path / "raw-files", mnist_head, train_rows=50, gz=False)
    manifest, created = idx.ingest(str(source), str(destination))
    assert created
    assert np.array_equal(idx.read_split(str(destination), "train").images, mnist_head["train"][0][:42])


def test_sha256sums_of_the_uncompressed_content_also_verify_gzip_files(small_idx_dir, destination):
    lines = []
    for name in FILE_NAMES:
        content = gzip.decompress((small_idx_dir / name).read_bytes())
        lines.append(f"{hashlib.sha256(content).hexdigest()}  {name[:-3]}\n")
    (small_idx_dir / "SHA256SUMS").write_text("".join(lines))
    _, created = idx.ingest(str(small_idx_dir), str(destination))
    assert created


def test_cli_publishes_under_the_data_root_by_default_and_reports_a_rerun_as_a_noop(
    small_idx_dir, isolated_data_root, caplog
):
    caplog.set_level(logging.INFO, logger="training.jobs.ingest")
    assert ingest_cli(str(small_idx_dir)) == 0
    expected = isolated_data_root / "mnist" / "raw-val"
    assert storage.read_manifest(str(expected))["splits"]["test"]["rows"] == 20
    assert ingest_cli(str(small_idx_dir)) == 0
    messages = [record.getMessage() for record in caplog.records if record.name == "training.jobs.ingest"]
    assert messages[0].startswith(f"published {expected.as_uri()} (train 42, validation 8, test 20 rows")
    assert messages[1].startswith(f"already complete, nothing to do: {expected.as_uri()}")


# --- Re-runs and overwrites --------------------------------------------------------------------------------


def test_second_ingest_returns_created_false_and_leaves_files_untouched(small_idx_dir, destination):
    first, created = idx.ingest(str(small_idx_dir), str(destination))
    assert created
    before = files_state(destination)
    second, created_again = idx.ingest(str(small_idx_dir), str(destination))
    assert not created_again
    assert second == first
    assert files_state(destination) == before
    assert_no_staging_left(destination)


def test_same_content_uncompressed_from_another_directory_is_a_noop(small_idx_dir, mnist_head, tmp_path,
                                                                     destination):
    idx.ingest(str(small_idx_dir), str(destination))
    before = files_state(destination)
    same_content = write_small_mnist(tmp_path / "same-content", mnist_head, train_rows=50, gz=False)
    _, created = idx.ingest(str(same_content), str(destination))
    assert not created
    assert files_state(destination) == before


def test_different_source_to_an_existing_destination_is_refused_and_leaves_it_intact(
    small_idx_dir, mnist_head, tmp_path, destination
):
    original, _ = idx.ingest(str(small_idx_dir), str(destination))
    before = files_state(destination)
    fewer_rows = write_small_mnist(tmp_path / "fewer-rows", mnist_head, train_rows=40)
    with pytest.raises(storage.DatasetError, match="already holds a different dataset.*--overwrite"):
        idx.ingest(str(fewer_rows), str(destination))
    assert files_state(destination) == before
    assert storage.read_manifest(str(destination)) == original
    assert_no_staging_left(destination)


def test_overwrite_replaces_the_dataset_atomically(small_idx_dir, mnist_head, tmp_path, destination,
                                                   monkeypatch):
    original, _ = idx.ingest(str(small_idx_dir), str(destination))
    fewer_rows = write_small_mnist(tmp_path / "fewer-rows", mnist_head, train_rows=40)
    seen_while_writing = []
    write_split = image_records.write_split

    def observing_write_split(staging, split, batch, *args, **kwargs):
        seen_while_writing.append(storage.read_manifest(str(destination))["data_version"])
        return write_split(staging, split, batch, *args, **kwargs)

    monkeypatch.setattr(idx, "write_split", observing_write_split)
    replaced, created = idx.ingest(str(fewer_rows), str(destination), overwrite=True)

    assert created
    # While the new splits are written, the old dataset is still complete in place.
    assert seen_while_writing == [original["data_version"]] * 3  # train, validation, test
    assert replaced["data_version"] != original["data_version"]
    assert storage.read_manifest(str(destination)) == replaced
    assert np.array_equal(idx.read_split(str(destination), "train").labels, mnist_head["train"][1][:33])
    assert set(files_state(destination)) == {*replaced["files"], storage.MANIFEST_NAME}
    assert_no_staging_left(destination)


def test_failed_overwrite_leaves_the_previous_dataset_intact(small_idx_dir, mnist_head, tmp_path, destination,
                                                            monkeypatch):
    original, _ = idx.ingest(str(small_idx_dir), str(destination))
    before = files_state(destination)
    fewer_rows = write_small_mnist(tmp_path / "fewer-rows", mnist_head, train_rows=40)
    write_split = image_records.write_split

    def failing_on_test_split(staging, split, batch, *args, **kwargs):
        if split == "test":
            raise OSError("disk full")
        return write_split(staging, split, batch, *args, **kwargs)

    monkeypatch.setattr(idx, "write_split", failing_on_test_split)
    with pytest.raises(OSError, match="disk full"):
        idx.ingest(str(fewer_rows), str(destination), overwrite=True)
    assert files_state(destination) == before
    assert storage.read_manifest(str(destination)) == original
    assert_no_staging_left(destination)


# --- The full real MNIST -----------------------------------------------------------------------------------


class RealIngest(NamedTuple):
    destination: Path
    manifest: dict
    created: bool


@pytest.fixture(scope="module")
def real_ingest(tmp_path_factory, mnist_source) -> RealIngest:
    destination = tmp_path_factory.mktemp("real") / "mnist"
    manifest, created = idx.ingest(str(mnist_source), str(destination))
    return RealIngest(destination, manifest, created)


def test_real_mnist_has_50000_train_10000_validation_and_10000_test_images_read_back_exactly(real_ingest,
                                                                                             mnist_source):
    assert real_ingest.created
    train = idx.read_split(str(real_ingest.destination), "train")
    validation = idx.read_split(str(real_ingest.destination), "validation")
    test = idx.read_split(str(real_ingest.destination), "test")
    assert (len(train), len(validation), len(test)) == (50_000, 10_000, 10_000)
    assert train.images.shape == (50_000, 28, 28) and train.images.dtype == np.uint8
    assert train.labels[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    both = np.concatenate([train.images, validation.images])
    assert abs(both.mean() - 0.1307 * 255) < 0.1  # the published mean of the 60,000
    assert np.array_equal(train.index, np.arange(50_000))
    assert np.array_equal(validation.index, np.arange(50_000, 60_000))
    assert np.array_equal(test.images[-5:], read_idx_head(mnist_source / TEST_IMAGES, 10_000)[-5:])


def test_real_mnist_manifest_records_rows_histograms_checksums_source_and_versions(real_ingest, mnist_source):
    manifest = real_ingest.manifest
    assert manifest["kind"] == idx.DATASET_KIND
    assert manifest["uri"] == real_ingest.destination.as_uri()
    assert manifest["source"] == str(mnist_source)
    assert manifest["image_shape"] == [28, 28]
    assert manifest["splits"] == {
        "train": {"rows": 50_000, "class_histogram": REAL_TRAIN_HISTOGRAM},
        "validation": {"rows": 10_000, "class_histogram": REAL_VALIDATION_HISTOGRAM},
        "test": {"rows": 10_000, "class_histogram": REAL_TEST_HISTOGRAM},
    }
    assert manifest["recipe"]["source_content_sha256"] == idx.CANONICAL_CONTENT_SHA256
    assert sorted(manifest["files"]) == ["test/part-00000.parquet"] + [
        f"train/part-{part:05d}.parquet" for part in range(5)
    ] + ["validation/part-00000.parquet"]
    local = storage.resolve(str(real_ingest.destination)).fs
    for relative, digest in manifest["files"].items():
        assert storage.file_digest(local, str(real_ingest.destination / relative)) == digest
    assert manifest["data_version"] == storage.data_version(manifest["files"])
    created_at = dt.datetime.fromisoformat(manifest["created_at"])
    assert abs(dt.datetime.now(dt.UTC) - created_at) < dt.timedelta(hours=1)
    assert manifest["code_version"].startswith(f"{training.__version__}+")
    assert storage.read_manifest(str(real_ingest.destination)) == manifest


def test_real_mnist_parquet_bytes_are_reproducible(real_ingest, mnist_source, tmp_path):
    again, _ = idx.ingest(str(mnist_source), str(tmp_path / "again"))
    assert again["files"] == real_ingest.manifest["files"]
    assert again["data_version"] == real_ingest.manifest["data_version"]


# --- An http(s) base URL as the source ---------------------------------------------------------------------


@pytest.fixture
def mirror(tmp_path, mnist_source) -> Path:
    """A served root whose ``mnist/`` holds a copy of the vendored files (tests tamper with it)."""
    shutil.copytree(mnist_source, tmp_path / "www" / "mnist")
    return tmp_path / "www"


def tamper_with_test_labels(directory: Path) -> None:
    labels = read_idx_head(directory / TEST_LABELS, 10_000).ravel().copy()
    labels[0] = (labels[0] + 1) % 10  # still a perfectly valid labels file
    write_idx_labels(directory / TEST_LABELS, labels)


def test_url_source_ingests_the_real_mnist_verifying_served_checksums(serve, mirror, destination):
    server = serve(mirror)
    manifest, created = idx.ingest(server.url, str(destination))
    assert created
    assert manifest["source"] == server.url
    assert manifest["splits"]["train"]["rows"] == 50_000 and manifest["splits"]["test"]["rows"] == 10_000
    assert manifest["recipe"]["source_content_sha256"] == idx.CANONICAL_CONTENT_SHA256
    assert "/mnist/SHA256SUMS" in server.requested
    assert {f"/mnist/{name}" for name in FILE_NAMES} <= set(server.requested)
    assert idx.read_split(str(destination), "train").labels[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]


def test_url_serving_a_tampered_file_is_rejected_and_nothing_published(serve, mirror, destination):
    tamper_with_test_labels(mirror / "mnist")
    server = serve(mirror)
    expected = f"^{TEST_LABELS}: sha256 mismatch .* from {re.escape(server.url + TEST_LABELS)}$"
    with pytest.raises(download.ChecksumError, match=expected):
        idx.ingest(server.url, str(destination))
    assert_nothing_published(destination)


def test_url_without_sha256sums_is_checked_against_the_canonical_mnist_content(serve, mirror, destination):
    (mirror / "mnist" / "SHA256SUMS").unlink()
    tamper_with_test_labels(mirror / "mnist")
    server = serve(mirror)
    expected = idx.CANONICAL_CONTENT_SHA256["t10k-labels-idx1-ubyte"]
    with pytest.raises(download.ChecksumError, match=f"^{TEST_LABELS}: sha256 mismatch \\(expected {expected}"):
        idx.ingest(server.url, str(destination))
    assert_nothing_published(destination)


def test_url_mirror_compressed_differently_without_sha256sums_is_accepted_by_content(serve, mirror,
                                                                                     destination):
    directory = mirror / "mnist"
    (directory / "SHA256SUMS").unlink()
    for name in (TEST_IMAGES, TEST_LABELS):  # served uncompressed: the .gz request gets a 404
        write_file(directory / name[:-3], gzip.decompress((directory / name).read_bytes()), gz=False)
        (directory / name).unlink()
    server = serve(mirror)
    manifest, created = idx.ingest(server.url, str(destination))
    assert created
    assert manifest["recipe"]["source_content_sha256"] == idx.CANONICAL_CONTENT_SHA256
    assert {"/mnist/t10k-images-idx3-ubyte.gz", "/mnist/t10k-images-idx3-ubyte"} <= set(server.requested)


def test_url_missing_a_file_is_rejected_naming_it(serve, mirror, destination):
    (mirror / "mnist" / TRAIN_LABELS).unlink()
    server = serve(mirror)
    expected = f"^{re.escape(server.url)}: neither {TRAIN_LABELS} nor train-labels-idx1-ubyte found"
    with pytest.raises(storage.DatasetError, match=expected):
        idx.ingest(server.url, str(destination))
    assert_nothing_published(destination)


def test_unreachable_url_is_reported_as_a_failed_download(destination):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mnist"
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(f'{url}/{TRAIN_IMAGES}')}: download failed"):
        idx.ingest(url, str(destination))
    assert_nothing_published(destination)


def test_url_serving_a_file_larger_than_any_mnist_file_is_refused_while_downloading(serve, mirror, destination,
                                                                                      monkeypatch):
    monkeypatch.setattr(idx, "MAX_FILE_BYTES", 4096)
    server = serve(mirror)
    expected = f"^{re.escape(server.url + TRAIN_IMAGES)}: [0-9]+ bytes, more than the 4096 allowed$"
    with pytest.raises(storage.DatasetError, match=expected):
        idx.ingest(server.url, str(destination))
    assert_nothing_published(destination)


def test_a_gzip_file_decompressing_beyond_any_mnist_file_is_refused(small_idx_dir, destination, monkeypatch):
    monkeypatch.setattr(idx, "MAX_FILE_BYTES", 20_000)  # the small train images decompress to 39,216 bytes
    with pytest.raises(idx.IdxError, match=f"^{TRAIN_IMAGES}: decompresses to more than 20000 bytes"):
        idx.ingest(str(small_idx_dir), str(destination))
    assert_nothing_published(destination)
