"""The example of a user's own workload (examples/csv_classifier/) installed as a user installs it: with pip, into a
folder of its own, found by its entry point (tests/test_own_workload.py, tests/airflow/test_own_workload_dag.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = REPO_ROOT / "examples" / "csv_classifier"


def install_example(target: Path) -> Path:
    """``pip install --target`` (this environment's pip) of a copy of the example — pip builds in the source folder
    (build/, egg-info) — as a user's ``pip install examples/csv_classifier``; returns the folder to put on
    PYTHONPATH."""
    source = target / "source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target / "site"), str(source)], check=True, capture_output=True, timeout=300)
    return target / "site"


def user_environment(site: Path) -> dict[str, str]:
    """A user's shell: the installed example and this checkout importable, and no $CLOUDBURST_WORKLOADS (the entry
    point alone registers the workload)."""
    environment = {key: value for key, value in os.environ.items() if key != "CLOUDBURST_WORKLOADS"}
    return {**environment, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)]), "CLOUDBURST_SPARK_UI": "false"}
