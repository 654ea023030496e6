"""The one download-and-verify helper: size limits, short transfers, checksums, and errors that name the URL."""

from __future__ import annotations

import hashlib
import io
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from training import storage
from training.datasets import download

CONTENT = bytes(range(256)) * 64  # 16 KiB
DIGEST = hashlib.sha256(CONTENT).hexdigest()


@pytest.fixture
def served(tmp_path, serve) -> str:
    """The URL of CONTENT on a real local HTTP server."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "data.bin").write_bytes(CONTENT)
    return f"{serve(tmp_path / 'www').root}data.bin"


@pytest.fixture
def raw_server() -> Iterator[Callable[[bytes], str]]:
    """A server answering one request with exactly the bytes given (for responses http.server will not send)."""
    listeners: list[socket.socket] = []

    def start(response: bytes) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def answer() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(response)

        threading.Thread(target=answer, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}/data.bin"

    yield start
    for listener in listeners:
        listener.close()


def fetch(url: str, **kwargs) -> tuple[download.Fetched | None, bytes]:
    out = io.BytesIO()
    fetched = download.download(url, out, **{"max_bytes": 1 << 20, "timeout_seconds": 10, **kwargs})
    return fetched, out.getvalue()


def test_a_download_is_streamed_hashed_and_checked(served):
    fetched, data = fetch(served, expected_sha256=DIGEST.upper(), expected_size=len(CONTENT))
    assert data == CONTENT and fetched == download.Fetched(served, len(CONTENT), DIGEST)


def test_a_wrong_checksum_or_size_names_the_url(served):
    with pytest.raises(download.ChecksumError, match=f"^{re.escape(served)}: sha256 mismatch \\(expected {'0' * 64}, "
                                                     f"got {DIGEST}\\)$"):
        fetch(served, expected_sha256="0" * 64)
    with pytest.raises(download.ChecksumError, match=f"^{re.escape(served)}: 16384 bytes, expected 16000$"):
        fetch(served, expected_size=16_000)
    with pytest.raises(ValueError, match="sha256 must be 64 hex digits, got 'abc'"):
        fetch(served, expected_sha256="abc")


def test_more_than_max_bytes_is_refused_by_the_announced_length_and_while_streaming(served, raw_server):
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(served)}: 16384 bytes, more than the 1000 allowed$"):
        fetch(served, max_bytes=1000)
    unannounced = raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n" + CONTENT)
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(unannounced)}: more than the 1000 bytes allowed$"):
        fetch(unannounced, max_bytes=1000)


def test_a_transfer_shorter_than_announced_is_refused(raw_server):
    url = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 16384\r\nConnection: close\r\n\r\n" + CONTENT[:5000])
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(url)}: download (ended after 5000 of 16384 bytes|"
                                                   f"failed)"):
        fetch(url)


def test_a_missing_file_is_none_only_when_allowed(served):
    missing = served.replace("data.bin", "missing.bin")
    assert fetch(missing, missing_ok=True) == (None, b"")
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(missing)}: download failed \\(HTTP 404\\)$"):
        fetch(missing)


def test_a_local_file_is_verified_by_the_same_rules(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(CONTENT)
    assert download.verify_file(path, "corpus.tar.gz", DIGEST).sha256 == DIGEST
    with pytest.raises(download.ChecksumError, match="^corpus.tar.gz: sha256 mismatch"):
        download.verify_file(path, "corpus.tar.gz", "f" * 64)
    with pytest.raises(storage.DatasetError, match=r"^absent.bin: cannot be read \(No such file or directory\)$"):
        download.verify_file(tmp_path / "absent.bin", "absent.bin", DIGEST)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("make", "kind"), [(os.mkfifo, "a FIFO"), (lambda path: path.symlink_to("/dev/zero"),
                                                                     "a character device"),
                                           (os.mkdir, "a directory")])
def test_a_local_file_that_is_not_a_regular_file_is_refused_unopened(tmp_path, make, kind):
    path = tmp_path / "corpus.tar.gz"
    make(path)
    with pytest.raises(storage.DatasetError, match=f"^corpus.tar.gz: {kind}, not a regular file; only regular"):
        download.verify_file(path, "corpus.tar.gz", DIGEST)
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(str(path))}: {kind}, not a regular file"):
        download.open_local_file(path)
