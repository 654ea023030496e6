"""The DAGs unchanged on the several-host cluster (infra/cluster/netns.sh, two worker hosts on 1gbit links):
only the client settings (`netns.sh env`: HADOOP_CONF_DIR, Airflow's webhdfs_default, the Spark driver's
address) and the Params data_root, spark_master = yarn and nodes = 2 differ from the embedded default. MNIST with
Downpour and keyword spotting with Horovod run through dag.test(); their data lives on the cluster's HDFS, every
Spark step is a YARN application, one worker on each host, and the training traffic crosses both hosts' links."""

from __future__ import annotations

import uuid

import pytest
from namespace_cluster import WORKERS, client_environment, cluster, link_bytes, needs_root

pytestmark = [pytest.mark.hadoop, needs_root]


@pytest.fixture(scope="module")
def cluster_settings():
    """Two worker hosts up, Spark's jars on their HDFS; the client settings. Taken down afterwards."""
    cluster("down", timeout=120)
    # A fresh HDFS: data a bench left from more hosts would re-replicate over the links the tests measure.
    wiped = cluster("wipe", timeout=120)
    assert wiped.returncode == 0, wiped.stdout + wiped.stderr
    up = cluster("up", "2", "1gbit")
    assert up.returncode == 0, up.stdout + up.stderr
    archive = cluster("spark-archive", timeout=900)
    assert archive.returncode == 0, archive.stderr
    settings = client_environment()
    # HDFS keeps its data across down and up (var/cluster): a root of this session's own, removed afterwards.
    settings["CLOUDBURST_TEST_DATA_ROOT"] = f"{settings['CLOUDBURST_HDFS_URI']}/cloudburst-dags-{uuid.uuid4().hex[:8]}"
    yield settings
    from training import storage

    where = storage.resolve(settings["CLOUDBURST_TEST_DATA_ROOT"])
    if where.fs.exists(where.path):
        where.fs.rm(where.path, recursive=True)
    down = cluster("down", timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr


def run_on_cluster(dag_bag, workload: str, settings: dict[str, str], monkeypatch, tmp_path, **workload_conf):
    """dag.test() of the workload's DAG on the cluster, nodes = 2 with a worker each, with the cluster's client
    settings; every task must succeed and the run must live on the cluster (check_on_the_cluster). Returns the
    run's RunSpec, its MLflow run and the bytes each worker host's link carried meanwhile."""
    import mlflow
    from airflow.dag_processing.dagbag import DagBag

    from training.config import RunSpec

    conf = {**workload_conf, "nodes": 2, "workers_per_node": 1, "spark_master": "yarn",
            "data_root": settings["CLOUDBURST_TEST_DATA_ROOT"], "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    for name, value in {**settings, "CLOUDBURST_SPARK_PROGRESS": "false"}.items():
        monkeypatch.setenv(name, value)
    # A DAG object of its own: dag.test(run_conf=…) leaves the conf in the DAG's params for later tests.
    dag = DagBag(dag_folder=dag_bag.dag_folder).dags[workload]
    before = {host: link_bytes(host) for host in WORKERS}
    dag_run = dag.test(run_conf=conf)
    carried = {host: link_bytes(host) - before[host] for host in WORKERS}
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert set(states.values()) == {"success"}, states
    client = mlflow.MlflowClient(conf["tracking_uri"])
    [run] = client.search_runs([client.get_experiment_by_name(workload).experiment_id])
    assert run.info.status == "FINISHED"
    spec = RunSpec.from_mapping({**conf, "workload": workload})
    check_on_the_cluster(spec, run, settings)
    return spec, run, carried


def on_the_links(carried: dict[str, int]) -> str:
    return ", ".join(f"{host} {count / 1e6:.1f} MB" for host, count in carried.items())


def yarn_application(settings: dict[str, str], application_id: str) -> dict:
    import json
    import urllib.request

    url = f"http://{settings['CLOUDBURST_YARN_WEB']}/ws/v1/cluster/apps/{application_id}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)["app"]


def check_on_the_cluster(spec, run, settings: dict[str, str]) -> None:
    """Its datasets on the cluster's HDFS; its training a YARN application that succeeded."""
    from training import storage

    for uri in (spec.raw_uri(), spec.augmented_uri(), spec.shards_uri()):
        assert uri.startswith(settings["CLOUDBURST_HDFS_URI"]) and storage.read_manifest(uri) is not None, uri
    assert run.data.tags["spark_master"] == "yarn"
    application = yarn_application(settings, run.data.tags["spark_application_id"])
    assert (application["name"], application["finalStatus"]) == ("cloudburst-train", "SUCCEEDED")


@pytest.mark.timeout(1500)
def test_the_mnist_dag_trains_downpour_on_both_hosts(dag_bag, cluster_settings, tmp_path, monkeypatch):
    _, run, carried = run_on_cluster(dag_bag, "mnist_elastic_cnn", cluster_settings, monkeypatch, tmp_path,
                                     train_limit=2000, test_limit=300, epochs=4, batch_size_per_worker=32,
                                     strategy="downpour", run_name="mnist-on-the-cluster")
    moved = run.data.metrics["bytes_moved"]
    print(f"MNIST, Downpour 2x1 on the cluster: {moved / 1e6:.1f} MB moved; on the links: {on_the_links(carried)}; "
          f"test accuracy {run.data.metrics['test_accuracy']:.3f}")
    assert moved > 0 and sum(carried.values()) >= 0.9 * moved
    assert all(count >= 0.3 * moved for count in carried.values()), carried  # a worker on each host
    # 248 steps per worker, as in test_downpour's four epochs (0.95-0.97 there). CI once measured 0.18 after 16
    # steps per worker (1,000 images, batch 128, 2 epochs): the asynchronous order of a few pushes decided it.
    assert 0.7 < run.data.metrics["test_accuracy"] <= 1


@pytest.mark.timeout(1500)
def test_the_keyword_spotting_dag_trains_horovod_on_both_hosts(dag_bag, cluster_settings, tmp_path, monkeypatch):
    spec, run, carried = run_on_cluster(dag_bag, "kws_densenet_bilstm", cluster_settings, monkeypatch, tmp_path,
                                        speakers=24, epochs=2, batch_size_per_worker=32, strategy="horovod",
                                        run_name="kws-on-the-cluster")
    # Ring all-reduce of two: each worker sends and receives its gradients (float32) every step.
    moved = 2 * 4 * run.data.metrics["model_parameters"] * int(run.data.tags["steps_per_epoch"]) * spec.epochs
    print(f"keyword spotting, Horovod 2x1 on the cluster: {moved / 1e6:.1f} MB of gradients; on the links: "
          f"{on_the_links(carried)}; test accuracy {run.data.metrics['test_accuracy']:.3f}")
    assert all(count >= 0.3 * moved for count in carried.values()), carried
    assert 0 <= run.data.metrics["test_accuracy"] <= 1
