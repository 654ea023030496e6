"""One place that builds Spark sessions with Cloudburst's defaults (local or cluster)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """Session on ``master`` if given, else spark-submit's, else $CLOUDBURST_SPARK_MASTER or local[*]."""
    # Python workers must run the same interpreter (and so the same pyspark/numpy) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Each Spark task is one core's worth of work; BLAS threads inside it would only oversubscribe.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master or not submitted_by_spark_submit():
        builder = builder.master(master or default_master())
    builder = (
        builder.config("spark.driver.memory", os.environ.get("CLOUDBURST_SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "4096")
        .config("spark.sql.shuffle.partitions", os.environ.get("CLOUDBURST_SPARK_SHUFFLE_PARTITIONS", "8"))
        .config("spark.ui.enabled", os.environ.get("CLOUDBURST_SPARK_UI", "true"))
        .config("spark.ui.showConsoleProgress", os.environ.get("CLOUDBURST_SPARK_PROGRESS", "true"))
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("CLOUDBURST_SPARK_LOG_LEVEL", "WARN"))
    if not session.sparkContext.master.startswith("local"):
        _ship_package(session)
    return session


def submitted_by_spark_submit() -> bool:
    """True inside a ``spark-submit`` driver: the JVM already runs and set the master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_master() -> str:
    return os.environ.get("CLOUDBURST_SPARK_MASTER", DEFAULT_MASTER)


def _ship_package(session: SparkSession) -> None:
    """Make the ``training`` package importable on cluster executors."""
    package_dir = Path(__file__).resolve().parent.parent
    archive = shutil.make_archive(
        str(Path(tempfile.mkdtemp()) / "cloudburst_training"), "zip", package_dir.parent, package_dir.name
    )
    session.sparkContext.addPyFile(archive)
