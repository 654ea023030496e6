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


def _netns(*arguments: str) -> tuple[int, str]:
    """``netns.sh ARGUMENTS``, bounded in time: its exit status and its last words (stderr, else stdout)."""
    try:
        done = subprocess.run([str(NETNS_SCRIPT), *arguments], capture_output=True, text=True,
                              timeout=SHAPE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise RunSpecError(f"netns.sh {' '.join(arguments)} took over {SHAPE_TIMEOUT_S} s") from error
    if done.returncode == 0:
        return 0, done.stdout.strip()
    lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
    return done.returncode, lines[-1].removeprefix("netns.sh: ")


def shape_links(link_rate: str) -> None:
    """Every host link of the running namespace cluster at ``link_rate``; RunSpecError in netns.sh's own words
    when it cannot (no cluster up, not root, a rate tc refuses)."""
    status, said = _netns("shape", link_rate)
    if status != 0:
        raise RunSpecError(f"link_rate={link_rate!r} needs the namespace cluster: {said}")
    log.info("%s", said)


def require_cluster() -> None:
    """RunSpecError unless the namespace cluster is up with every daemon running (``netns.sh status``): a study
    with link profiles checks this before anything runs."""
    status, said = _netns("status")
    if status != 0:
        raise RunSpecError(f"link profiles need the namespace cluster with every daemon running (make cluster-up): "
                           f"{said}")
