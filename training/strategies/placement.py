"""Where workers run and how many threads each gets: nodes × workers_per_node workers, the same rule for every
strategy.

In local mode (one machine) a node is simulated by a group of task slots: each of ``nodes`` groups gets an equal
share of this machine's cores, and each of its ``workers_per_node`` workers an equal share of that. On a cluster
a node's cores are the executor's (``spark.executor.cores``), with one executor per node.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec


def cores_per_node(spark: SparkSession, spec: RunSpec) -> int:
    """In local mode every simulated node gets an equal share of this machine's cores."""
    if spark.sparkContext.master.startswith("local"):
        return max(1, (os.cpu_count() or 1) // spec.nodes)
    return int(spark.conf.get("spark.executor.cores", str(spec.workers_per_node)))


def threads_per_worker(spec: RunSpec, node_cores: int) -> int:
    """TensorFlow intra-op threads: the node's cores shared by its workers, unless set explicitly."""
    if spec.threads_per_worker:
        return spec.threads_per_worker
    return max(1, node_cores // spec.workers_per_node)


def worker_environment() -> dict[str, str]:
    """The driver's environment for worker processes, minus TensorFlow's log noise and stray thread pools."""
    environment = dict(os.environ)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    environment["OMP_NUM_THREADS"] = "1"  # TensorFlow sizes its own pools; OpenMP/BLAS must not add threads
    environment["OPENBLAS_NUM_THREADS"] = "1"
    return environment


def driver_host(spark: SparkSession) -> str:
    """The address workers reach the driver at: loopback in local mode, Spark's driver host on a cluster."""
    if spark.sparkContext.master.startswith("local"):
        return "127.0.0.1"
    return spark.conf.get("spark.driver.host")
