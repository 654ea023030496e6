"""The pipeline on the real Hadoop of `make test`: datasets on HDFS, Spark on YARN, through the `cloudburst`
command as a user runs it. Local mode and YARN publish byte-identical datasets; Horovod and Downpour train on YARN
executors; a cluster without room for every worker is a clear error, not a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from training import storage
from training.config import RunSpec

pytestmark = [pytest.mark.hadoop, pytest.mark.spark]

CLI = str(Path(sys.executable).parent / "cloudburst")
SLICE = {"train_limit": 600, "test_limit": 200, "nodes": 1, "workers_per_node": 2}


def cloudburst(step: str, spec: RunSpec, timeout: int = 900, **environment: str) -> subprocess.CompletedProcess:
    """The `cloudburst` command, as a user with the cluster's configuration in HADOOP_CONF_DIR runs it."""
    from hadoop_cluster import hadoop_or_skip

    cluster = {"HADOOP_CONF_DIR": hadoop_or_skip().conf_dir, "CLOUDBURST_SPARK_PROGRESS": "false"}
    return subprocess.run([CLI, step, *spec.to_args()], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **cluster, **environment})


def run_steps(spec: RunSpec, steps: list[str], **environment: str) -> None:
    for step in steps:
        result = cloudburst(step, spec, **environment)
        assert result.returncode == 0, f"{step} on {spec.spark_master}:\n{result.stderr[-4000:]}"


@pytest.fixture(scope="module")
def mnist_on_hdfs(hadoop):
    """Ingest → augment → shard of an MNIST slice, once on HDFS + YARN and once on local disk + local[2]."""
    root = hadoop.fresh_directory("pipeline")
    import tempfile

    local_root = tempfile.mkdtemp(prefix="cloudburst-local-twin-")
    on_yarn = RunSpec(**SLICE, data_root=root, spark_master="yarn", tracking_uri=f"sqlite:///{local_root}/ml.db")
    on_local = RunSpec(**SLICE, data_root=local_root, spark_master="local[2]")
    run_steps(on_yarn, ["ingest", "augment", "shard"])
    run_steps(on_local, ["ingest", "augment", "shard"])
    yield on_yarn, on_local
    hadoop.remove(root)


def test_ingest_augment_shard_on_yarn_publish_the_same_bytes_as_local_mode(hadoop, mnist_on_hdfs):
    on_yarn, on_local = mnist_on_hdfs
    for uri_of in (RunSpec.raw_uri, RunSpec.augmented_uri, RunSpec.shards_uri):
        remote, local = storage.require_manifest(uri_of(on_yarn)), storage.require_manifest(uri_of(on_local))
        assert remote["uri"].startswith(hadoop.hdfs_uri)
        assert remote["files"] == local["files"], uri_of.__name__
        assert remote["data_version"] == local["data_version"]
    yarn_apps = {app["name"] for app in hadoop.yarn_applications() if app["finalStatus"] == "SUCCEEDED"}
    assert {"cloudburst-augment", "cloudburst-shard"} <= yarn_apps


def test_a_rerun_on_yarn_is_a_noop(hadoop, mnist_on_hdfs):
    """A retried data step finds its dataset published: it changes nothing and submits no YARN application."""
    on_yarn, _ = mnist_on_hdfs
    before = storage.require_manifest(on_yarn.shards_uri())
    applications = {app["id"] for app in hadoop.yarn_applications()}
    for step in ("augment", "shard"):
        result = cloudburst(step, on_yarn)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "already complete, nothing to do" in result.stderr
    assert storage.require_manifest(on_yarn.shards_uri()) == before
    assert {app["id"] for app in hadoop.yarn_applications()} == applications


@pytest.mark.timeout(1200)
# Downpour with batches of 32: with the default 128, 1,200 images gave each worker 4 steps an epoch, and after 4
# epochs the accuracy depended on the asynchronous order of 8 pushes (0.14 in one CI run, well above 0.3 in others).
@pytest.mark.parametrize(("strategy", "epochs", "batch_size"), [("horovod", 2, 128), ("downpour", 4, 32)])
def test_training_on_yarn_executors_ends_in_mlflow_with_the_application_id(mnist_on_hdfs, tmp_path, strategy, epochs,
                                                                          batch_size):
    import mlflow

    on_yarn, _ = mnist_on_hdfs
    spec = RunSpec(**{**on_yarn.to_mapping(), "strategy": strategy, "epochs": epochs,
                      "batch_size_per_worker": batch_size,
                      "run_name": f"yarn-{strategy}", "tracking_uri": f"sqlite:///{tmp_path}/mlflow.db"})
    # The driver's address pins Horovod's interface: left to choose, it may take the namespace cluster's bridge,
    # which that module's tests (running beside this one) remove and re-create — the ranks then abort.
    run_steps(spec, ["train", "evaluate"], CLOUDBURST_SPARK_DRIVER_HOST="127.0.0.1")
    client = mlflow.MlflowClient(spec.tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name(spec.workload).experiment_id])
    assert run.data.tags["spark_master"] == "yarn"
    assert run.data.tags["spark_application_id"].startswith("application_")
    assert run.data.metrics["test_accuracy"] > 0.3  # 1200 images on 2 workers: well above chance (0.1)
    checkpoints = storage.resolve(storage.join(spec.run_uri(), "checkpoints"))
    assert checkpoints.uri.startswith("hdfs://") and checkpoints.fs.exists(checkpoints.path)


def test_yarn_without_room_for_every_worker_is_a_clear_error_not_a_hang(mnist_on_hdfs):
    """Three 5 GB executors do not fit the NodeManager's 12 GB: the job says so within the wait, in one line."""
    on_yarn, _ = mnist_on_hdfs
    spec = RunSpec(**{**on_yarn.to_mapping(), "nodes": 3, "workers_per_node": 1, "run_name": "no-room"})
    # The shards exist for 2 workers; 3 nodes need 3: validation would stop it first, so shard for 3 on HDFS.
    result = cloudburst("shard", spec)
    assert result.returncode == 0, result.stderr[-3000:]
    # 15 s: YARN grants the two executors that fit within a few seconds; the wait only has to outlast that.
    result = cloudburst("train", spec, timeout=300, CLOUDBURST_SPARK_EXECUTOR_MEMORY="5g",
                        CLOUDBURST_EXECUTOR_WAIT_S="15")
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "ERROR cloudburst" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "of the 3 executors this run needs" in errors[0] and "MB and" in errors[0], errors[0]


SUBMITTED_PROBE = """
import json
from training.config import RunSpec
from training.jobs.spark_session import spark_session
session = spark_session("cloudburst-probe", spec=RunSpec(nodes=1, workers_per_node=2))
conf = session.sparkContext.getConf()
print("PROBE", json.dumps({key: conf.get(key, None) for key in (
    "spark.master", "spark.driver.host", "spark.executor.instances", "spark.executor.cores", "spark.task.cpus",
    "spark.executor.memory")}))
session.stop()
"""


def test_a_job_submitted_by_spark_submit_gets_the_cluster_settings_and_keeps_its_own(hadoop, tmp_path):
    """As Airflow's Spark operator runs a step: spark-submit --master yarn. The job still shapes its executors
    for the run and takes the driver's address from CLOUDBURST_SPARK_DRIVER_HOST (before, SparkConf() read empty
    until the session existed, the master read as local, and every cluster setting was left out: on the
    namespace cluster the executors then called the driver at an address they cannot reach); a --conf given to
    spark-submit wins."""
    probe = tmp_path / "probe.py"
    probe.write_text(SUBMITTED_PROBE)
    python = Path(sys.executable)
    environment = {**os.environ, "HADOOP_CONF_DIR": hadoop.conf_dir, "CLOUDBURST_SPARK_DRIVER_HOST": "127.0.0.1",
                   "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}", "PYSPARK_PYTHON": str(python),
                   "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "CLOUDBURST_SPARK_PROGRESS": "false"}
    result = subprocess.run(["spark-submit", "--master", "yarn", "--conf", "spark.executor.memory=1g", str(probe)],
                            capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stderr[-4000:]
    import json

    [line] = [line for line in result.stdout.splitlines() if line.startswith("PROBE ")]
    assert json.loads(line.removeprefix("PROBE ")) == {
        "spark.master": "yarn", "spark.driver.host": "127.0.0.1", "spark.executor.instances": "1",
        "spark.executor.cores": "2", "spark.task.cpus": "1", "spark.executor.memory": "1g"}


def test_a_wrong_namenode_port_is_one_line_before_any_spark_job(hadoop, tmp_path):
    from urllib.parse import urlparse

    parsed = urlparse(hadoop.hdfs_uri)
    spec = RunSpec(**SLICE, data_root=f"hdfs://{parsed.hostname}:{parsed.port + 1}/cloudburst", spark_master="yarn")
    result = cloudburst("ingest", spec, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"takes hdfs:// connections on port {parsed.port}, not on port {parsed.port + 1}" in result.stderr


def test_mnist_ingests_from_an_hdfs_landing_zone_with_its_checksums(hadoop, hdfs_root, mnist_source, tmp_path):
    landing = storage.join(hdfs_root, "landing", "mnist")
    where = storage.resolve(landing)
    where.fs.makedirs(where.path, exist_ok=True)
    for path in sorted(mnist_source.iterdir()):
        where.fs.put_file(str(path), f"{where.path}/{path.name}")
    spec = RunSpec(train_limit=300, test_limit=100, data_source=landing, data_root=str(tmp_path / "data"))
    result = cloudburst("ingest", spec, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    local = RunSpec(train_limit=300, test_limit=100, data_root=str(tmp_path / "local"))
    assert cloudburst("ingest", local, timeout=300).returncode == 0
    assert storage.require_manifest(spec.raw_uri())["files"] == storage.require_manifest(local.raw_uri())["files"]
    # A corrupted file in the landing zone is refused by its checksum, naming it; nothing is published.
    with where.fs.open(f"{where.path}/t10k-labels-idx1-ubyte.gz", "wb") as handle:
        handle.write(b"\x1f\x8b not the labels")
    spec = RunSpec(train_limit=300, test_limit=100, data_source=landing, data_root=str(tmp_path / "other"))
    result = cloudburst("ingest", spec, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "t10k-labels-idx1-ubyte.gz" in result.stderr
    assert storage.read_manifest(spec.raw_uri()) is None


def test_keyword_spotting_ingests_from_an_hdfs_landing_zone_as_a_directory_or_an_archive(hadoop, hdfs_root,
                                                                                           tmp_path):
    """A Speech Commands corpus landed on HDFS (a directory, or the .tar.gz) ingests to the same clips as the
    local copy; a landing zone over the archive limits or a missing one is one line and publishes nothing."""
    import tarfile

    from test_speech_ingest import make_corpus

    corpus = make_corpus(tmp_path / "corpus", bad=True)
    archive = tmp_path / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(corpus, arcname="speech_commands")
    landing = storage.join(hdfs_root, "landing", "speech")
    where = storage.resolve(landing)
    where.fs.put(str(corpus), f"{where.path}/corpus", recursive=True)
    where.fs.put_file(str(archive), f"{where.path}/corpus.tar.gz")
    common = {"workload": "kws_densenet_bilstm", "data_root": str(tmp_path / "data")}
    local = RunSpec(**common, data_source=str(corpus))
    assert cloudburst("ingest", local, timeout=300).returncode == 0
    expected = storage.require_manifest(local.raw_uri())
    for source in (f"{landing}/corpus", f"{landing}/corpus.tar.gz"):
        spec = RunSpec(**common, data_source=source)
        result = cloudburst("ingest", spec, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        manifest = storage.require_manifest(spec.raw_uri())
        assert manifest["splits"] == expected["splits"] and manifest["skipped"] == expected["skipped"], source
        assert manifest["recipe"]["source_content"] == expected["recipe"]["source_content"], source
    for source, message in ((f"{landing}/corpus", "more than archive_max_members"),
                            (f"{landing}/nothing-here", "no such file or directory on HDFS")):
        spec = RunSpec(workload="kws_densenet_bilstm", data_root=str(tmp_path / "refused"), data_source=source,
                       archive_max_members=5)
        result = cloudburst("ingest", spec, timeout=300)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
        assert message in result.stderr
        assert storage.read_manifest(spec.raw_uri()) is None


def test_hdfs_in_safe_mode_is_one_line_and_nothing_is_written(hadoop, tmp_path):
    admin = [str(Path(__file__).resolve().parents[1] / "infra" / "hadoop" / "hadoop.sh"), "dfsadmin", "-safemode"]
    spec = RunSpec(**SLICE, data_root=f"{hadoop.hdfs_uri}/cloudburst-tests/safe-mode", spark_master="yarn")
    subprocess.run([*admin, "enter"], check=True, capture_output=True, timeout=150)
    try:
        result = cloudburst("ingest", spec, timeout=120)
    finally:
        subprocess.run([*admin, "leave"], check=True, capture_output=True, timeout=150)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "HDFS is in safe mode and refuses writes" in result.stderr
    assert storage.read_manifest(spec.raw_uri()) is None


@pytest.mark.timeout(1500)
def test_keyword_spotting_runs_every_step_on_yarn_and_hdfs_with_model_averaging(hadoop, hdfs_root, tmp_path):
    """The second workload on the same cluster: clips ingested to HDFS, features computed by YARN executors (the
    same content as local mode), shards, model averaging on YARN and an evaluation logged to MLflow."""
    import mlflow
    from test_speech_ingest import make_corpus

    corpus = make_corpus(tmp_path / "corpus", words=("yes", "no", "up", "down", "cat", "dog"), bad=False)
    common = {"workload": "kws_densenet_bilstm", "data_source": str(corpus), "augment_copies": 1, "epochs": 1,
              "batch_size_per_worker": 16, "strategy": "averaging", "rounds_per_epoch": 1, "nodes": 1,
              "workers_per_node": 2, "run_name": "kws-on-yarn", "tracking_uri": f"sqlite:///{tmp_path}/mlflow.db"}
    on_yarn = RunSpec(**common, data_root=hdfs_root, spark_master="yarn")
    run_steps(on_yarn, ["ingest", "features", "shard", "train", "evaluate"])
    on_local = RunSpec(**common, data_root=str(tmp_path / "local"), spark_master="local[2]")
    run_steps(on_local, ["ingest", "features"])
    for uri_of in (RunSpec.raw_uri, RunSpec.augmented_uri):
        remote, local = storage.require_manifest(uri_of(on_yarn)), storage.require_manifest(uri_of(on_local))
        assert remote["uri"].startswith(hadoop.hdfs_uri)
        assert remote["files"] == local["files"], uri_of.__name__
    client = mlflow.MlflowClient(on_yarn.tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name(on_yarn.workload).experiment_id])
    assert run.data.tags["spark_master"] == "yarn"
    assert run.data.tags["spark_application_id"].startswith("application_")
    assert 0.0 <= run.data.metrics["test_accuracy"] <= 1.0 and run.data.params["strategy"] == "averaging"
    yarn_apps = {app["name"] for app in hadoop.yarn_applications() if app["finalStatus"] == "SUCCEEDED"}
    assert {"cloudburst-features", "cloudburst-train"} <= yarn_apps
