"""Fetching a dataset's files over http(s) or from local paths and verifying them (size, sha256), with errors that
name the file.

One helper for every ingestion: MNIST's four IDX files and Speech Commands' archive alike. A download streams to
a file object, never holds more than ``max_bytes``, and fails if the server sends fewer bytes than it announced.
A local file is read only if it is a regular file: a FIFO would block its reader for good, a device never ends.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from training import local_files, storage

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")


class ChecksumError(storage.DatasetError):
    """A file's sha256 or size is not the one it must have; the message names the file and where it came from."""


@dataclass(frozen=True)
class Fetched:
    """What was read: from where, how many bytes, their sha256."""

    origin: str
    size: int
    sha256: str


def check_sha256_format(expected: str, setting: str = "sha256") -> str:
    """The expected digest, lower-cased; a ValueError unless it is 64 hex digits."""
    digest = expected.strip().lower()
    if not SHA256_PATTERN.match(digest):
        raise ValueError(f"{setting} must be 64 hex digits, got {expected!r}")
    return digest


def check_sha256(name: str, actual: str | Iterable[str], expected: str, origin: str = "") -> None:
    """Raise ChecksumError unless ``expected`` is the digest (or one of the digests) computed for ``name``."""
    candidates = sorted({actual} if isinstance(actual, str) else set(actual))
    if expected.lower() not in candidates:
        where = f" from {origin}" if origin and origin != name else ""
        raise ChecksumError(f"{name}: sha256 mismatch (expected {expected.lower()}, got {candidates[0]}){where}")


def check_size(name: str, size: int, expected_size: int | None, origin: str = "") -> None:
    if expected_size is not None and size != expected_size:
        where = f" from {origin}" if origin and origin != name else ""
        raise ChecksumError(f"{name}: {size} bytes, expected {expected_size}{where}")


def open_local_file(path: str | Path, name: str = "") -> BinaryIO:
    """A local regular file opened for reading; a storage.DatasetError naming it (as ``name``, when given) for
    anything else — a FIFO, a device, a directory — checked on the open descriptor (training.local_files)."""
    try:
        return local_files.open_regular_file(path)
    except local_files.UnreadableFileError as error:
        raise storage.DatasetError(f"{name or path}: {str(error).removeprefix(f'{path}: ')}") from None


def verify_file(path: Path, name: str = "", expected_sha256: str = "", expected_size: int | None = None) -> Fetched:
    """Hash a local regular file and check it against what is expected (an empty sha256 checks nothing)."""
    digest, size = hashlib.sha256(), 0
    try:
        with open_local_file(path, name) as handle:
            while block := handle.read(BLOCK_BYTES):
                digest.update(block)
                size += len(block)
    except OSError as error:
        raise storage.DatasetError(f"{name or path}: cannot be read ({error.strerror})") from error
    fetched = Fetched(str(path), size, digest.hexdigest())
    _verify(name or str(path), fetched, expected_sha256, expected_size)
    return fetched


def download(
    url: str,
    out: BinaryIO,
    max_bytes: int,
    timeout_seconds: float,
    expected_sha256: str = "",
    expected_size: int | None = None,
    missing_ok: bool = False,
) -> Fetched | None:
    """Stream ``url`` into ``out`` and verify it; None if ``missing_ok`` and the server answers 404.

    Refused with a storage.DatasetError naming the URL: a failed connection or transfer, an HTTP error, more than
    ``max_bytes``, fewer bytes than the server's Content-Length; a ChecksumError for a wrong sha256 or size.
    """
    log.info("downloading %s", url)
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            announced = response.headers.get("Content-Length")
            announced = int(announced) if announced and announced.isdigit() else None
            if announced is not None and announced > max_bytes:
                raise storage.DatasetError(f"{url}: {announced} bytes, more than the {max_bytes} allowed")
            while block := response.read(BLOCK_BYTES):
                size += len(block)
                if size > max_bytes:
                    raise storage.DatasetError(f"{url}: more than the {max_bytes} bytes allowed")
                digest.update(block)
                out.write(block)
    except urllib.error.HTTPError as error:
        if error.code == 404 and missing_ok:
            return None
        raise storage.DatasetError(f"{url}: download failed (HTTP {error.code})") from error
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, OSError) as error:
        raise storage.DatasetError(f"{url}: download failed ({getattr(error, 'reason', None) or error})") from error
    if announced is not None and size != announced:
        raise storage.DatasetError(f"{url}: download ended after {size} of {announced} bytes")
    fetched = Fetched(url, size, digest.hexdigest())
    _verify(url, fetched, expected_sha256, expected_size)
    return fetched


def _verify(name: str, fetched: Fetched, expected_sha256: str, expected_size: int | None) -> None:
    check_size(name, fetched.size, expected_size)
    if expected_sha256:
        check_sha256(name, fetched.sha256, check_sha256_format(expected_sha256))
