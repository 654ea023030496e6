"""A run's ``link_rate``: the namespace cluster's links (infra/cluster/netns.sh) re-shaped before it trains, so a
scaling study measures each configuration at each of its link profiles on one running cluster."""

from __future__ import annotations

import logging
import subprocess

from training import REPO_ROOT
from training.settings import RunSpecError

log = logging.getLogger(__name__)

NETNS_SCRIPT = REPO_ROOT / "infra" / "cluster" / "netns.sh"
SHAPE_TIMEOUT_S = 60  # tc on a few veth pairs takes well under a second


def shape_links(link_rate: str) -> None:
    """Every host link of the running namespace cluster at ``link_rate``; RunSpecError in netns.sh's own words
    when it cannot (no cluster up, not root, a rate tc refuses)."""
    try:
        done = subprocess.run([str(NETNS_SCRIPT), "shape", link_rate], capture_output=True, text=True,
                              timeout=SHAPE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise RunSpecError(f"link_rate={link_rate!r}: netns.sh shape took over {SHAPE_TIMEOUT_S} s") from error
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
        raise RunSpecError(f"link_rate={link_rate!r} needs the namespace cluster: {why[-1].removeprefix('netns.sh: ')}")
    log.info("%s", done.stdout.strip())


def require_cluster() -> None:
    """RunSpecError unless the namespace cluster is up with every daemon running (``netns.sh status``): a study
    with link profiles checks this before anything runs."""
    try:
        done = subprocess.run([str(NETNS_SCRIPT), "status"], capture_output=True, text=True,
                              timeout=SHAPE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise RunSpecError(f"netns.sh status took over {SHAPE_TIMEOUT_S} s") from error
    if done.returncode != 0:
        first = (done.stdout or done.stderr).strip().splitlines() or [f"exit {done.returncode}"]
        raise RunSpecError(f"link profiles need the namespace cluster with every daemon running (make cluster-up): "
                           f"{first[0]}")
