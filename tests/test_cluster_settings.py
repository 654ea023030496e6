"""The spark_master setting and the executor shape a cluster run asks for (README "Workers per node")."""

from __future__ import annotations

import pytest

from training.config import RunSpec, RunSpecError
from training.jobs.spark_session import cluster_settings


@pytest.mark.parametrize("master", ["", "local", "local[*]", "local[4]", "yarn", "spark://master:7077",
                                    "spark://a:7077,b:7077"])
def test_spark_masters_that_spark_understands_are_accepted(master):
    assert RunSpec(spark_master=master).validate().spark_master == master


@pytest.mark.parametrize("master", ["mesos://m:5050", "local[0]", "yarn-client", "spark://nohost", "local[*] ",
                                    "k8s://https://x"])
def test_other_masters_are_refused_naming_the_setting(master):
    with pytest.raises(RunSpecError, match=r"spark_master=.*must be local, local\[\*\], local\[N\], yarn or spark"):
        RunSpec(spark_master=master).validate()


def test_the_master_is_a_flag_of_every_step():
    spec = RunSpec(spark_master="yarn")
    assert "--spark-master" in spec.to_args() and "yarn" in spec.to_args()


@pytest.mark.parametrize(("nodes", "workers_per_node", "executor_cores", "task_cpus"),
                         [(1, 2, None, "1"), (2, 2, None, "1"), (2, 1, None, "1"), (1, 2, "4", "2"), (3, 4, "8", "2")])
def test_one_executor_per_node_and_a_task_slot_per_worker(monkeypatch, nodes, workers_per_node, executor_cores,
                                                          task_cpus):
    if executor_cores:
        monkeypatch.setenv("CLOUDBURST_EXECUTOR_CORES", executor_cores)
    else:
        monkeypatch.delenv("CLOUDBURST_EXECUTOR_CORES", raising=False)
    settings = cluster_settings("yarn", RunSpec(nodes=nodes, workers_per_node=workers_per_node))
    assert settings["spark.executor.instances"] == str(nodes)
    assert settings["spark.executor.cores"] == (executor_cores or str(workers_per_node))
    assert settings["spark.task.cpus"] == task_cpus
    assert settings["spark.dynamicAllocation.enabled"] == "false"
    assert settings["spark.scheduler.minRegisteredResourcesRatio"] == "1.0"


def test_executor_cores_that_do_not_split_between_the_workers_are_refused(monkeypatch):
    monkeypatch.setenv("CLOUDBURST_EXECUTOR_CORES", "3")
    with pytest.raises(ValueError, match="spark.executor.cores=3 is not a multiple of workers_per_node=2"):
        cluster_settings("yarn", RunSpec(workers_per_node=2))


def test_yarn_gets_spark_jars_from_hdfs_and_the_executors_the_runs_environment(monkeypatch):
    monkeypatch.setenv("CLOUDBURST_SPARK_YARN_ARCHIVE", "hdfs://127.0.0.1:9000/spark/jars.zip")
    monkeypatch.setenv("CLOUDBURST_WORKLOADS", "toy_workload")
    settings = cluster_settings("yarn", RunSpec())
    assert settings["spark.yarn.archive"] == "hdfs://127.0.0.1:9000/spark/jars.zip"
    assert settings["spark.executorEnv.CLOUDBURST_WORKLOADS"] == "toy_workload"
    assert "spark.yarn.archive" not in cluster_settings("spark://m:7077", RunSpec())


def test_executors_compute_with_the_driver_machine_s_blas_kernels(monkeypatch):
    """Another OpenBLAS kernel changes the last bits of the elastic fields: YARN containers do not inherit it."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    settings = cluster_settings("yarn", RunSpec())
    assert (settings["spark.executorEnv.OPENBLAS_CORETYPE"], settings["spark.executorEnv.OPENBLAS_L2_SIZE"]) == (
        "Haswell", "512")
    assert settings["spark.executorEnv.OPENBLAS_NUM_THREADS"] == "1"


def test_yarn_without_its_configuration_is_one_line_naming_the_fix(monkeypatch):
    from training.jobs.spark_session import check_cluster_configuration

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(ValueError, match=r"spark_master='yarn': set HADOOP_CONF_DIR"):
        check_cluster_configuration("yarn")
    check_cluster_configuration("local[2]")
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    check_cluster_configuration("yarn")


def test_the_containers_jvm_options_come_from_the_cluster_s_client_settings(monkeypatch):
    """infra/'s small clusters export the daemons' JVM options (infra/hadoop/daemons.sh) for Spark's containers,
    the same options the driver gets; without the variable a cluster keeps Spark's defaults."""
    import re
    from pathlib import Path

    from training.jobs.spark_session import DRIVER_JAVA_OPTIONS

    daemons = (Path(__file__).resolve().parents[1] / "infra" / "hadoop" / "daemons.sh").read_text()
    [small_cluster] = re.findall(r'^SMALL_CLUSTER_JAVA_OPTS="([^"]*)"$', daemons, re.MULTILINE)
    assert set(small_cluster.split()) == set(DRIVER_JAVA_OPTIONS.split())
    monkeypatch.delenv("CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS", raising=False)
    assert not any("extraJavaOptions" in key for key in cluster_settings("yarn", RunSpec()))
    monkeypatch.setenv("CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS", small_cluster)
    on_yarn = cluster_settings("yarn", RunSpec())
    assert on_yarn["spark.executor.extraJavaOptions"] == on_yarn["spark.yarn.am.extraJavaOptions"] == small_cluster
    standalone = cluster_settings("spark://m:7077", RunSpec())
    assert standalone["spark.executor.extraJavaOptions"] == small_cluster
    assert "spark.yarn.am.extraJavaOptions" not in standalone


@pytest.mark.spark
def test_the_driver_jvm_runs_with_cloudburst_s_options_unless_spark_submit_opts_says_otherwise(spark, tmp_path):
    """Short jobs whose work is Python's: C1 only and the serial collector (DRIVER_JAVA_OPTIONS) — read from the
    running JVM itself; a SPARK_SUBMIT_OPTS of the user's, even an empty one, wins."""
    import os
    import subprocess
    import sys

    from training.jobs.spark_session import DRIVER_JAVA_OPTIONS

    def jvm_arguments(session) -> list[str]:
        runtime = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        return list(runtime.getInputArguments())

    assert set(DRIVER_JAVA_OPTIONS.split()) <= set(jvm_arguments(spark))
    probe = ("from training.jobs.spark_session import spark_session\n"
             "session = spark_session('cloudburst-probe', master='local[1]')\n"
             "runtime = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
             "print('ARGUMENTS', ' '.join(runtime.getInputArguments()))\n"
             "session.stop()\n")
    environment = {**os.environ, "SPARK_SUBMIT_OPTS": "", "CLOUDBURST_SPARK_UI": "false"}
    result = subprocess.run([sys.executable, "-c", probe], env=environment, capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("ARGUMENTS")]
    assert "-XX:TieredStopAtLevel=1" not in line and "-XX:+UseSerialGC" not in line, line
