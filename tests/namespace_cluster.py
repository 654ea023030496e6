"""The several-host cluster of infra/cluster/netns.sh as the tests drive it, from either Python environment:
its script, its addresses, its client settings and the byte counters of its links."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "infra" / "cluster" / "netns.sh"
MASTER = "10.77.0.10"
WORKERS = {"cb-node1": "10.77.0.11", "cb-node2": "10.77.0.12"}

# Namespaces need root; `make test` runs as root (and requires Hadoop), so these tests never skip there.
needs_root = pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CLOUDBURST_REQUIRE_HADOOP"),
                                reason="network namespaces need root")


def cluster(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``netns.sh ARGUMENTS``, its output captured."""
    return subprocess.run([str(SCRIPT), *arguments], capture_output=True, text=True, timeout=timeout, check=False)


def client_environment() -> dict[str, str]:
    """What ``eval "$(netns.sh env)"`` exports, as a mapping."""
    settings = {}
    for line in cluster("env", timeout=30).stdout.splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        settings[name] = value.strip("'")
    return settings


def link_bytes(host: str) -> int:
    """Bytes through a host's link so far, both directions (the bridge end of its veth pair)."""
    statistics = Path(f"/sys/class/net/v-{host}/statistics")
    return int((statistics / "rx_bytes").read_text()) + int((statistics / "tx_bytes").read_text())
