"""Shared fixtures: an isolated environment for every test, the real MNIST, and a tiny valid MNIST copy."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from idx_files import read_idx_head, write_idx_images, write_idx_labels, write_sha256sums

from training.workloads.mnist_elastic_cnn import VENDORED_MNIST, idx

SMALL_ROWS = {"train": 50, "test": 20}


# --- Order and parallel runs ------------------------------------------------------------------------------

# `make test` runs each suite on two pytest-xdist workers (--dist loadgroup). A module's tests stay on one worker, so
# a module-scoped fixture (a trained model, a cluster) is built once. The two cluster modules are the longest
# chains: they go first, each on a worker of its own, and the other modules fill in beside them. They never share a
# cluster: the namespace cluster has its own daemons and addresses; the make-test Hadoop serves one worker.
FIRST_MODULES = ("test_netns_cluster.py", "test_dags_on_namespace_cluster.py", "test_on_hadoop.py")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return FIRST_MODULES.index(item.path.name) if item.path.name in FIRST_MODULES else len(FIRST_MODULES)

    items.sort(key=rank)  # stable: the order inside a module is kept (the cluster modules rely on it)
    for item in items:
        # Every test of the make-test Hadoop shares one worker: one of them puts HDFS in safe mode, another fills
        # YARN to the brim, and neither may happen under another test's feet.
        uses_hadoop = item.path.name == "test_on_hadoop.py" or "hadoop" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("hadoop" if uses_hadoop else item.path.stem))


# --- Environment -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def session_environment(tmp_path_factory):
    """Settings that fixtures of every scope (module-scoped Spark sessions too) must already see."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLOUDBURST_DATA_ROOT", str(tmp_path_factory.mktemp("session-data-root")))
        patch.setenv("CLOUDBURST_SPARK_UI", "false")
        yield


@pytest.fixture(autouse=True)
def isolated_data_root(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own empty dataset root, so nothing is ever written into the checkout."""
    root = tmp_path_factory.mktemp("data-root")
    monkeypatch.setenv("CLOUDBURST_DATA_ROOT", str(root))
    return root


# --- MNIST -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mnist_source() -> Path:
    """The vendored real MNIST: the four gzip IDX files and their SHA256SUMS."""
    return VENDORED_MNIST


@pytest.fixture(scope="session")
def mnist_head(mnist_source) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """split → (images, labels): the first rows of the real MNIST (50 train, 20 test)."""
    return {
        split: (
            read_idx_head(mnist_source / f"{idx.FILE_STEMS[(split, 'images')]}.gz", rows),
            read_idx_head(mnist_source / f"{idx.FILE_STEMS[(split, 'labels')]}.gz", rows),
        )
        for split, rows in SMALL_ROWS.items()
    }


@pytest.fixture
def small_idx_dir(tmp_path, mnist_head) -> Path:
    """A directory holding a tiny but valid MNIST: the four gzip IDX files plus a matching SHA256SUMS."""
    directory = tmp_path / "small-mnist"
    directory.mkdir()
    for split, (images, labels) in mnist_head.items():
        write_idx_images(directory / f"{idx.FILE_STEMS[(split, 'images')]}.gz", images)
        write_idx_labels(directory / f"{idx.FILE_STEMS[(split, 'labels')]}.gz", labels)
    write_sha256sums(directory)
    return directory


# --- Spark -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark(session_environment):
    """One real local[2] Spark session for the whole test run (starting the JVM costs seconds)."""
    from training.jobs.spark_session import spark_session

    session = spark_session("cloudburst-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture
def spark_forbidden(monkeypatch) -> None:
    """From here on, starting a Spark session fails the test ("a Spark session was started"): for steps that must
    settle their work from manifests and run records alone."""
    from training.jobs import spark_session as sessions

    def no_spark(*arguments, **keywords):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(sessions, "spark_session", no_spark)


# --- HTTP -------------------------------------------------------------------------------------------------


class Server(NamedTuple):
    url: str  # the served directory's mnist/ folder (the MNIST tests' base URL)
    requested: list[str]
    root: str  # the served directory itself


@pytest.fixture
def serve() -> Iterator[Callable[[Path], Server]]:
    """Start real HTTP servers on 127.0.0.1 (free ports) serving a directory; all stopped after the test."""
    running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(directory: Path) -> Server:
        requested: list[str] = []

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                requested.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        running.append((server, thread))
        root = f"http://127.0.0.1:{server.server_address[1]}/"
        return Server(f"{root}mnist/", requested, root)

    yield start
    for server, thread in running:
        server.shutdown()
        server.server_close()
        thread.join()


# --- Hadoop ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def hadoop():
    """The real HDFS + YARN of `make test` (tests/hadoop_cluster.py)."""
    from hadoop_cluster import hadoop_or_skip

    return hadoop_or_skip()


@pytest.fixture
def hdfs_root(hadoop, request) -> Iterator[str]:
    """A fresh directory on the real HDFS for one test, removed afterwards."""
    uri = hadoop.fresh_directory(request.node.name[:40].replace("[", "-").replace("]", ""))
    yield uri
    hadoop.remove(uri)
