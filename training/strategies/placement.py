"""Where workers run and how many threads each gets: nodes × workers_per_node workers, the same rule for every
strategy.

In local mode (one machine) a node is simulated by a group of task slots: each of ``nodes`` groups gets an equal
share of this machine's cores, and each of its ``workers_per_node`` workers an equal share of that. On a cluster
a node's cores are the executor's (``spark.executor.cores``), with one executor per node.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

_ignored_thread_requests: set[int] = set()  # warned about once per process


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


def configure_tensorflow_threads(intra_op: int) -> int:
    """Size this process's TensorFlow pools, ``intra_op`` threads per operation and one operation at a time; every
    worker kind calls this first. TensorFlow sizes its pools once per process: a later call asking for another size
    keeps the first (with one warning). Returns the intra-op threads in effect (0: TensorFlow's default)."""
    if intra_op < 1:
        raise ValueError(f"intra_op must be ≥ 1 thread, got {intra_op}")
    import tensorflow as tf

    threading = tf.config.threading
    try:  # setting the value already in effect is a no-op, even after initialisation
        threading.set_intra_op_parallelism_threads(intra_op)
        threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # already initialised in this process (a reused Spark Python worker): keep its pools
        if intra_op not in _ignored_thread_requests:
            _ignored_thread_requests.add(intra_op)
            log.warning("TensorFlow already runs with %d intra-op threads in process %d; %d requested are ignored",
                        threading.get_intra_op_parallelism_threads(), os.getpid(), intra_op)
    return threading.get_intra_op_parallelism_threads()


def worker_environment() -> dict[str, str]:
    """The driver's environment for worker processes, minus TensorFlow's log noise and stray thread pools."""
    environment = dict(os.environ)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    environment["OMP_NUM_THREADS"] = "1"  # TensorFlow sizes its own pools; OpenMP/BLAS must not add threads
    environment["OPENBLAS_NUM_THREADS"] = "1"
    return environment


def horovod_interfaces(spark_master: str) -> set[str] | None:
    """The network interface Horovod's tasks and Gloo ring use (its ``nics``): loopback in local mode, the
    interface that holds $CLOUDBURST_SPARK_DRIVER_HOST on a cluster, None when that is unset or not an address of
    this machine (Horovod then chooses).

    Left to choose, Horovod takes the first of the interfaces every task has, in no fixed order. In local mode
    every task is on this machine, so that can be any interface here — a bridge that another program is about to
    remove (the namespace cluster's ``cb0``), and the ranks then abort. With one task on a cluster it may take
    loopback, and a task in another network namespace asks its own 127.0.0.1 and aborts. Where the driver's address
    is set explicitly (a cluster whose hosts reach this side only through it), its interface is the one to use."""
    if spark_master.startswith("local"):
        return interface_holding("127.0.0.1")
    address = os.environ.get("CLOUDBURST_SPARK_DRIVER_HOST")
    return interface_holding(address) if address else None


def interface_holding(address: str) -> set[str] | None:
    """The name of this machine's interface that holds ``address``, as a one-name set; None when none does."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(entry.address == address for entry in addresses):
            return {name}
    return None


def driver_host(spark: SparkSession) -> str:
    """The address workers reach the driver at: loopback in local mode, Spark's driver host on a cluster."""
    if spark.sparkContext.master.startswith("local"):
        return "127.0.0.1"
    return spark.conf.get("spark.driver.host")
