"""One place that builds Spark sessions with Cloudburst's defaults: local mode, or a cluster (YARN, standalone)
shaped by the run's nodes × workers_per_node."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
# Passed on to YARN containers: the executors' Python reads the same workloads, stores and thread limits.
# OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE pick OpenBLAS' kernels; another kernel sums in another order, so the elastic
# fields (two GEMMs) differ in the last bit and a pixel can round the other way: YARN containers do not inherit
# them, and without them an augment on YARN published other bytes than local mode on the same machine.
EXECUTOR_ENVIRONMENT = ("CLOUDBURST_WORKLOADS", "CLOUDBURST_WEBHDFS_PORT", "CLOUDBURST_HDFS_USER", "HADOOP_USER_NAME",
                        "MLFLOW_TRACKING_URI", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "OPENBLAS_CORETYPE",
                        "OPENBLAS_L2_SIZE")

# The driver JVM's compiler and collector, as SPARK_SUBMIT_OPTS when that is not set (set it, even empty, to choose):
# Cloudburst's Spark jobs are short and their work is Python's (pandas UDFs over Arrow), so the JVM never runs long
# enough to repay C2's compilation, and G1 keeps threads of its own. Both cost CPU the job needs: measured on 2
# cores, an augment of 2,000 MNIST images took 16.2 CPU-seconds with the JVM's defaults and 10.5 with these, one of
# the full MNIST 19.8 and 13.0 (and 2 s less wall time).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class ClusterCapacityError(RuntimeError):
    """The cluster did not give the run the executors it needs to run every worker at once."""


def spark_session(app_name: str, master: str | None = None, spec: RunSpec | None = None) -> SparkSession:
    """Session on ``master`` if given, else spark-submit's, else the run's ``spark_master``, else
    $CLOUDBURST_SPARK_MASTER or local[*]. On a cluster, ``spec`` shapes the executors (one per node, a task slot
    per worker; README "Workers per node")."""
    # Python workers must run the same interpreter (and so the same pyspark/numpy) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Each Spark task is one core's worth of work; BLAS threads inside it would only oversubscribe.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("SPARK_SUBMIT_OPTS", DRIVER_JAVA_OPTIONS)  # read when pyspark starts the driver's JVM
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    chosen = master
    if submitted_by_spark_submit():
        # Join spark-submit's JVM now: until then SparkConf() is empty, and its master (yarn) read as the local
        # default, so a submitted job left out every cluster setting (the Spark driver's address among them).
        SparkContext._ensure_initialized()
    elif chosen is None:
        chosen = (spec.spark_master if spec is not None else "") or default_master()
    if chosen is not None:
        builder = builder.master(chosen)
    effective = chosen or SparkConf().get("spark.master", DEFAULT_MASTER)
    builder = (
        builder.config("spark.driver.memory", os.environ.get("CLOUDBURST_SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "4096")
        .config("spark.sql.shuffle.partitions", os.environ.get("CLOUDBURST_SPARK_SHUFFLE_PARTITIONS", "8"))
        .config("spark.ui.enabled", os.environ.get("CLOUDBURST_SPARK_UI", "true"))
        .config("spark.ui.showConsoleProgress", os.environ.get("CLOUDBURST_SPARK_PROGRESS", "true"))
    )
    if not effective.startswith("local"):
        check_cluster_configuration(effective)
        for key, value in cluster_settings(effective, spec).items():
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("CLOUDBURST_SPARK_LOG_LEVEL", "WARN"))
    if not session.sparkContext.master.startswith("local"):
        _ship_package(session)
        log.info("Spark on %s: application %s", session.sparkContext.master, session.sparkContext.applicationId)
    return session


class LazySparkSession:
    """A Spark session started on first use, with :func:`spark_session`'s arguments. A data step whose dataset is
    already published (a retried task, a second DAG run on the same data) only reads the manifest: it never starts
    a JVM or, on YARN, an application with its executors (15–25 s each on the test clusters)."""

    def __init__(self, app_name: str, master: str | None = None, spec: RunSpec | None = None) -> None:
        self._arguments = (app_name, master, spec)
        self._session: SparkSession | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # only the session's public API starts it (not copy/pickle probing)
            raise AttributeError(name)
        if self._session is None:
            self._session = spark_session(*self._arguments)
        return getattr(self._session, name)


def check_cluster_configuration(master: str) -> None:
    """YARN is found through HADOOP_CONF_DIR (or YARN_CONF_DIR): say so in one line before Spark fails deep in a
    log."""
    if master.startswith("yarn") and not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
        raise ValueError(f"spark_master={master!r}: set HADOOP_CONF_DIR to the cluster's client configuration "
                         "(here: eval \"$(infra/hadoop/hadoop.sh env)\")")


def cluster_settings(master: str, spec: RunSpec | None) -> dict[str, str]:
    """Spark settings for a cluster master: executors shaped by the run, YARN's jars from HDFS, the environment
    executors need. Explicit settings (spark-submit --conf, spark-defaults.conf) are not overridden."""
    from pyspark import SparkConf

    given = SparkConf()
    settings: dict[str, str] = {}
    if spec is not None:
        executor_cores = int(given.get("spark.executor.cores", os.environ.get("CLOUDBURST_EXECUTOR_CORES", "0"))
                             or 0) or spec.workers_per_node
        if executor_cores % spec.workers_per_node:
            raise ValueError(f"spark.executor.cores={executor_cores} is not a multiple of workers_per_node="
                             f"{spec.workers_per_node}: each node's cores must split evenly between its workers")
        settings |= {
            "spark.executor.instances": str(spec.nodes),
            "spark.executor.cores": str(executor_cores),
            "spark.task.cpus": str(executor_cores // spec.workers_per_node),
            # All executors before the first stage: Horovod and Downpour need every worker running at once.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": f"{executor_wait_seconds()}s",
            "spark.dynamicAllocation.enabled": "false",
        }
    settings["spark.executor.memory"] = os.environ.get("CLOUDBURST_SPARK_EXECUTOR_MEMORY", "2g")
    # A task result over 1 MB (Spark's default: a ceiling worker's weights and optimizer state, a model
    # averaging round's) is otherwise left in the executor's block manager for the driver to fetch by the
    # executor's host *name*, which the driver's machine need not resolve (the namespace cluster's hosts are
    # known only inside the cluster); sent directly, it rides the connection the executor opened to the driver.
    settings["spark.task.maxDirectResultSize"] = DIRECT_RESULT_SIZE
    if os.environ.get("CLOUDBURST_SPARK_DRIVER_HOST"):
        # The address executors (and Downpour's workers) reach the driver at, when the machine's host name does
        # not lead there: the namespace cluster's hosts see this side only as its bridge address.
        settings["spark.driver.host"] = os.environ["CLOUDBURST_SPARK_DRIVER_HOST"]
        settings["spark.driver.bindAddress"] = os.environ["CLOUDBURST_SPARK_DRIVER_HOST"]
    if master.startswith("yarn") and os.environ.get("CLOUDBURST_SPARK_YARN_ARCHIVE"):
        settings["spark.yarn.archive"] = os.environ["CLOUDBURST_SPARK_YARN_ARCHIVE"]
    if os.environ.get("CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS"):
        # The JVMs a job starts on the cluster (executors; YARN's application master): the small clusters of
        # infra/ set DRIVER_JAVA_OPTIONS here, a real cluster keeps Spark's defaults unless its admin says so.
        options = os.environ["CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS"]
        settings["spark.executor.extraJavaOptions"] = options
        if master.startswith("yarn"):
            settings["spark.yarn.am.extraJavaOptions"] = options
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    settings["spark.pyspark.python"] = python
    for name in EXECUTOR_ENVIRONMENT:
        if os.environ.get(name):
            settings[f"spark.executorEnv.{name}"] = os.environ[name]
    settings["spark.executorEnv.OMP_NUM_THREADS"] = "1"
    settings["spark.executorEnv.OPENBLAS_NUM_THREADS"] = "1"
    return {key: value for key, value in settings.items() if not given.contains(key)}


DIRECT_RESULT_SIZE = "64m"  # under spark.rpc.message.maxSize (128m), which bounds any direct result


def executor_wait_seconds() -> int:
    return int(os.environ.get("CLOUDBURST_EXECUTOR_WAIT_S", "120"))


def wait_for_executors(spark: SparkSession, spec: RunSpec) -> None:
    """On a cluster, wait (bounded) until every node's executor runs, so a stage whose tasks must all run at once
    (Horovod's ring, Downpour's workers) never waits forever for workers the cluster cannot give; a clear error
    instead."""
    context = spark.sparkContext
    if context.master.startswith("local"):
        return
    deadline = time.monotonic() + executor_wait_seconds()
    while True:
        executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        if executors >= spec.nodes:
            return
        if time.monotonic() > deadline:
            raise ClusterCapacityError(
                f"{context.master} gave {executors} of the {spec.nodes} executors this run needs "
                f"(nodes={spec.nodes} × workers_per_node={spec.workers_per_node}: executors of "
                f"{spark.conf.get('spark.executor.cores')} cores and {spark.conf.get('spark.executor.memory')}) "
                f"within {executor_wait_seconds()} s{cluster_capacity_hint(context.master, _yarn_web(context))}; "
                f"free capacity, ask for fewer workers, or wait longer ($CLOUDBURST_EXECUTOR_WAIT_S) when a host "
                f"is still unpacking a shipped environment (spark.yarn.dist.archives: minutes on its first run)")
        time.sleep(1)


def _yarn_web(context: Any) -> str | None:
    """The ResourceManager's web address from the cluster's own configuration (HADOOP_CONF_DIR's yarn-site.xml)."""
    try:
        return context._jsc.hadoopConfiguration().get("yarn.resourcemanager.webapp.address")
    except Exception:  # no JVM configuration to ask (a stopped context): the hint is optional
        return None


def cluster_capacity_hint(master: str, configured: str | None = None) -> str:
    """What YARN's ResourceManager says is free, when it can be asked: at $CLOUDBURST_YARN_WEB, else the address
    the cluster's configuration names, else this machine's."""
    if not master.startswith("yarn"):
        return ""
    import json
    import urllib.request

    address = os.environ.get("CLOUDBURST_YARN_WEB") or configured or "127.0.0.1:8088"
    try:
        with urllib.request.urlopen(f"http://{address}/ws/v1/cluster/metrics", timeout=5) as reply:
            metrics = json.load(reply)["clusterMetrics"]
    except (OSError, ValueError, KeyError):
        return ""
    return (f" (YARN at {address}: {metrics.get('availableMB')} MB and {metrics.get('availableVirtualCores')} vcores "
            f"free, {metrics.get('activeNodes')} active NodeManagers)")


def submitted_by_spark_submit() -> bool:
    """True inside a ``spark-submit`` driver: the JVM already runs and set the master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_master() -> str:
    return os.environ.get("CLOUDBURST_SPARK_MASTER", DEFAULT_MASTER)


def _ship_package(session: SparkSession) -> None:
    """Make the ``training`` package importable on cluster executors."""
    package_dir = Path(__file__).resolve().parent.parent
    folder = tempfile.mkdtemp(prefix="cloudburst-package-")
    # The driver's file server serves the archive from this path while the session lives: removed at exit, not
    # before (one left behind per Spark session had piled up to 200 in /tmp).
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    archive = shutil.make_archive(str(Path(folder) / "cloudburst_training"), "zip", package_dir.parent,
                                  package_dir.name)
    session.sparkContext.addPyFile(archive)
