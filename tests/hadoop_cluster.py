"""The real Hadoop (HDFS + YARN daemons) that `make test` starts with infra/hadoop/hadoop.sh and describes in the
environment (`eval "$(infra/hadoop/hadoop.sh env)"`), for the tests that run against it.

Run by hand without it, those tests skip with the command to start it; under `make test`
(CLOUDBURST_REQUIRE_HADOOP=1) a missing or unhealthy cluster fails them instead, so CI cannot pass without it.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from dataclasses import dataclass

import pytest

START_HINT = ("start it with `make hadoop-up` and `eval \"$(infra/hadoop/hadoop.sh env)\"` (make test does both)")


@dataclass(frozen=True)
class Hadoop:
    hdfs_uri: str  # hdfs://127.0.0.1:8020
    conf_dir: str
    webhdfs_port: int
    yarn_web: str  # 127.0.0.1:8088

    def fresh_directory(self, prefix: str) -> str:
        """A new, unused directory URI on HDFS for one test."""
        return f"{self.hdfs_uri}/cloudburst-tests/{prefix}-{uuid.uuid4().hex[:8]}"

    def remove(self, uri: str) -> None:
        from training import storage

        where = storage.resolve(uri)
        if where.fs.exists(where.path):
            where.fs.rm(where.path, recursive=True)

    def yarn_applications(self) -> list[dict]:
        with urllib.request.urlopen(f"http://{self.yarn_web}/ws/v1/cluster/apps", timeout=10) as reply:
            return (json.load(reply).get("apps") or {}).get("app") or []


def hadoop_or_skip() -> Hadoop:
    """The running cluster, or a skip (a failure under make test) saying how to start it."""
    # make test passes the configuration as CLOUDBURST_TEST_HADOOP_CONF_DIR (infra/run-tests.sh says why).
    uri = os.environ.get("CLOUDBURST_HDFS_URI")
    conf_dir = os.environ.get("CLOUDBURST_TEST_HADOOP_CONF_DIR") or os.environ.get("HADOOP_CONF_DIR")

    def unavailable(reason: str):
        if os.environ.get("CLOUDBURST_REQUIRE_HADOOP"):
            pytest.fail(f"Hadoop is required here but {reason}", pytrace=False)
        pytest.skip(f"needs the real Hadoop: {reason}; {START_HINT}")

    if not uri or not conf_dir:
        unavailable("CLOUDBURST_HDFS_URI / HADOOP_CONF_DIR are not set")
    assert uri is not None and conf_dir is not None
    from urllib.parse import urlparse

    from training import storage

    hadoop = Hadoop(uri.rstrip("/"), conf_dir, storage.webhdfs_port(),
                    os.environ.get("CLOUDBURST_YARN_WEB", "127.0.0.1:8088"))
    parsed = urlparse(hadoop.hdfs_uri)
    try:
        storage.check_namenode(parsed.hostname, parsed.port or storage.DEFAULT_NAMENODE_RPC_PORT,
                               hadoop.webhdfs_port)
        with urllib.request.urlopen(f"http://{hadoop.yarn_web}/ws/v1/cluster/metrics", timeout=10) as reply:
            active = json.load(reply)["clusterMetrics"]["activeNodes"]
    except (storage.DatasetError, OSError, ValueError, KeyError) as error:
        unavailable(f"it is not usable ({error})")
    if not active:
        unavailable(f"YARN at {hadoop.yarn_web} has no active NodeManager")
    return hadoop
