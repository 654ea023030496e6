"""Workers per node: the same placement rule for every strategy, in local mode and on a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from training.config import RunSpec
from training.strategies.placement import (
    configure_tensorflow_threads,
    cores_per_node,
    driver_host,
    threads_per_worker,
)


def cluster_session(executor_cores: str, driver: str = "edge-node-1") -> SimpleNamespace:
    """What the placement rule reads from a cluster session: its master and two settings."""
    settings = {"spark.executor.cores": executor_cores, "spark.driver.host": driver}
    return SimpleNamespace(sparkContext=SimpleNamespace(master="spark://master:7077"),
                           conf=SimpleNamespace(get=lambda key, default=None: settings.get(key, default)))


@pytest.mark.spark
def test_local_mode_splits_this_machines_cores_between_simulated_nodes_and_their_workers(spark):
    cores = os.cpu_count() or 1
    assert cores_per_node(spark, RunSpec(nodes=1, workers_per_node=2)) == cores
    assert cores_per_node(spark, RunSpec(nodes=2, workers_per_node=1)) == max(1, cores // 2)
    assert driver_host(spark) == "127.0.0.1"


def test_on_a_cluster_a_node_has_its_executors_cores_shared_by_its_workers():
    session = cluster_session(executor_cores="16")
    spec = RunSpec(nodes=4, workers_per_node=4)
    assert cores_per_node(session, spec) == 16
    assert threads_per_worker(spec, 16) == 4
    assert driver_host(session) == "edge-node-1"


def test_threads_per_worker_is_never_zero_and_an_explicit_value_wins():
    assert threads_per_worker(RunSpec(workers_per_node=4), node_cores=2) == 1
    assert threads_per_worker(RunSpec(workers_per_node=2, threads_per_worker=3), node_cores=2) == 3


def test_tensorflow_threads_are_sized_once_per_process_and_later_requests_keep_the_first():
    # A fresh process: TensorFlow's pools in this one may already be initialised by other tests.
    script = textwrap.dedent("""
        import tensorflow as tf
        from training.strategies.placement import configure_tensorflow_threads
        first = configure_tensorflow_threads(2)
        again = configure_tensorflow_threads(2)
        tf.constant(1.0) + 1.0  # TensorFlow initialises its pools here
        same = configure_tensorflow_threads(2)
        other = configure_tensorflow_threads(3)
        print(first, again, same, other, tf.config.threading.get_inter_op_parallelism_threads())
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=True)
    assert completed.stdout.split() == ["2", "2", "2", "2", "1"]
    assert "3 requested are ignored" in completed.stderr


def test_a_worker_needs_at_least_one_thread():
    with pytest.raises(ValueError, match="≥ 1 thread"):
        configure_tensorflow_threads(0)


def test_horovod_uses_loopback_in_local_mode_the_interface_of_an_explicit_driver_address_and_otherwise_chooses(
        monkeypatch):
    from training.strategies.placement import horovod_interfaces

    monkeypatch.setenv("CLOUDBURST_SPARK_DRIVER_HOST", "198.51.100.7")  # ignored: every local task is on this side
    assert horovod_interfaces("local[2]") == {"lo"}
    monkeypatch.delenv("CLOUDBURST_SPARK_DRIVER_HOST", raising=False)
    assert horovod_interfaces("yarn") is None
    monkeypatch.setenv("CLOUDBURST_SPARK_DRIVER_HOST", "127.0.0.1")
    assert horovod_interfaces("yarn") == {"lo"}
    monkeypatch.setenv("CLOUDBURST_SPARK_DRIVER_HOST", "198.51.100.7")  # TEST-NET-2: no interface here holds it
    assert horovod_interfaces("yarn") is None
