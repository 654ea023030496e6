"""The MNIST DAG through dag.test() with its data on the real HDFS and its Spark steps on YARN — the DAG unchanged,
only two Params differ from the embedded default."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.hadoop


@pytest.fixture(scope="module")
def cluster():
    from hadoop_cluster import hadoop_or_skip

    return hadoop_or_skip()


@pytest.mark.timeout(1500)
def test_the_mnist_dag_on_hdfs_and_yarn_ends_in_mlflow(dag_bag, cluster, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.setenv("HADOOP_CONF_DIR", cluster.conf_dir)  # what spark-submit reads to find YARN

    from training import storage
    from training.config import RunSpec

    data_root = cluster.fresh_directory("dag")
    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    conf = {"train_limit": 1000, "test_limit": 300, "epochs": 1, "strategy": "horovod", "data_root": data_root,
            "spark_master": "yarn", "tracking_uri": tracking_uri, "run_name": "on-yarn"}
    try:
        from airflow.dag_processing.dagbag import DagBag

        # A DAG object of its own: dag.test(run_conf=…) leaves the conf in the DAG's params, and the shared one's
        # later runs (test_mnist_elastic_cnn_dag.py) would run on YARN under this run name.
        dag = DagBag(dag_folder=dag_bag.dag_folder).dags["mnist_elastic_cnn"]
        dag_run = dag.test(run_conf=conf)
        states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
        assert set(states.values()) == {"success"}, states

        spec = RunSpec.from_mapping({**conf, "workload": "mnist_elastic_cnn"})
        for uri in (spec.raw_uri(), spec.augmented_uri(), spec.shards_uri()):
            assert uri.startswith(cluster.hdfs_uri) and storage.read_manifest(uri) is not None, uri
        client = mlflow.MlflowClient(tracking_uri)
        [run] = client.search_runs([client.get_experiment_by_name("mnist_elastic_cnn").experiment_id])
        assert run.info.status == "FINISHED"
        assert run.data.tags["spark_master"] == "yarn"
        application = run.data.tags["spark_application_id"]
        finished = {app["id"]: app for app in cluster.yarn_applications()}
        assert finished[application]["name"] == "cloudburst-train"
        assert finished[application]["finalStatus"] == "SUCCEEDED"
        assert 0.5 < run.data.metrics["test_accuracy"] <= 1
    finally:
        cluster.remove(data_root)
