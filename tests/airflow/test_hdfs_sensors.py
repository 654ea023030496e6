"""The HDFS sensors of every workload DAG (plugins/cloudburst_hdfs.py), against the real HDFS: wait_for_raw_data
waits until an hdfs:// data source has landed and lets any other source through at once, without asking HDFS;
check_shards passes only once the shards' manifest is published, on HDFS and on local disks."""

from __future__ import annotations

import datetime
import json
import socket
from urllib.parse import urlparse

import pytest

from training import storage
from training import workload_registry as workloads

MNIST = "mnist_elastic_cnn"


@pytest.fixture(scope="session")
def hadoop():
    """The real HDFS + YARN that `make test` starts (tests/hadoop_cluster.py); a skip saying how, without it."""
    from hadoop_cluster import hadoop_or_skip

    return hadoop_or_skip()


@pytest.fixture
def hdfs_dir(hadoop):
    uri = hadoop.fresh_directory("sensors")
    yield uri
    hadoop.remove(uri)


@pytest.fixture
def dead_webhdfs(monkeypatch) -> str:
    """Point the sensors' connection at a port nothing listens on: any WebHDFS request would fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS_DEFAULT",
                       json.dumps({"conn_type": "webhdfs", "host": "127.0.0.1", "port": port}))
    return f"127.0.0.1:{port}"


def context_for(workload: str = MNIST, **params):
    """A poke's context, as Airflow gives it: the DAG's Params with the trigger's values, and a run id."""
    from cloudburst_params import run_params

    values = {name: param.value for name, param in run_params(workload).items()}
    return {"params": {**values, **params}, "run_id": "manual__2026-11-30T10:00:00+00:00"}


def put(uri: str, content: bytes = b"x") -> None:
    """Write one file (on HDFS through fsspec's WebHDFS, or locally), creating its directory."""
    where = storage.resolve(uri)
    where.fs.makedirs(where.path.rsplit("/", 1)[0], exist_ok=True)
    with where.fs.open(where.path, "wb") as handle:
        handle.write(content)


def landing_sensor(workload: str = MNIST):
    from cloudburst_hdfs import LandingZoneSensor

    return LandingZoneSensor(workload=workload)


def manifest_sensor(workload: str = MNIST):
    from cloudburst_hdfs import ManifestSensor

    return ManifestSensor(workload=workload)


# --- wait_for_raw_data --------------------------------------------------------------------------------------


@pytest.mark.hadoop
@pytest.mark.parametrize("workload", [MNIST, "kws_densenet_bilstm", "toy_dense"])
def test_the_landing_zone_sensor_waits_until_the_raw_data_is_on_hdfs(hdfs_dir, workload):
    landing = f"{hdfs_dir}/landing/mnist"
    sensor, context = landing_sensor(workload), context_for(workload, data_source=landing)
    assert sensor.poke(context) is False
    assert sensor.poke(context) is False, "a second poke must not change the answer"
    put(f"{landing}/train-images-idx3-ubyte.gz")
    assert sensor.poke(context) is True
    assert sensor.filepath == urlparse(landing).path


@pytest.mark.hadoop
def test_a_uri_naming_another_host_is_checked_through_the_connection_and_both_are_logged(hdfs_dir, capsys, caplog):
    landing = f"{hdfs_dir}/landing/mnist"
    put(f"{landing}/train-images-idx3-ubyte.gz")
    # A name this machine cannot even resolve: only the path counts, asked of the connection's NameNode.
    elsewhere = f"hdfs://namenode.invalid:8020{urlparse(landing).path}"
    assert landing_sensor().poke(context_for(data_source=elsewhere)) is True
    logged = capsys.readouterr().out + caplog.text
    assert "names NameNode namenode.invalid" in logged and "'webhdfs_default' at 127.0.0.1:" in logged, \
        logged[-2000:]


@pytest.mark.parametrize(
    ("workload", "source"),
    [
        (MNIST, ""),  # the vendored MNIST
        (MNIST, "/srv/data/mnist"),
        (MNIST, "file:///srv/data/mnist"),
        (MNIST, "https://storage.example.org/mnist/"),
        ("kws_densenet_bilstm", "synthetic"),
        ("kws_densenet_bilstm", ""),
        ("kws_densenet_bilstm", "/srv/data/speech_commands_v0.02.tar.gz"),
        ("toy_dense", ""),
    ],
)
def test_a_source_not_on_hdfs_passes_at_once_without_asking_hdfs(dead_webhdfs, workload, source):
    assert landing_sensor(workload).poke(context_for(workload, data_source=source)) is True


def test_an_hdfs_source_with_no_namenode_answering_fails_the_poke_naming_both(dead_webhdfs):
    """The dead connection above really is dead: an hdfs:// source fails (the task's retries apply), not 'False'."""
    from airflow.providers.apache.hdfs.hooks.webhdfs import AirflowWebHDFSHookException

    with pytest.raises(AirflowWebHDFSHookException, match=f"hdfs://namenode:8020/landing/mnist.*{dead_webhdfs}"):
        landing_sensor().poke(context_for(data_source="hdfs://namenode:8020/landing/mnist"))


@pytest.mark.hadoop
@pytest.mark.timeout(300)
def test_under_dag_test_the_sensor_is_rescheduled_until_the_data_lands(dag_bag, hdfs_dir, monkeypatch):
    """Reschedule mode works under dag.test(): the sensor gives its slot back, is run again, and succeeds once the
    data is there (the other tasks are marked successful: this run is about the wait)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    # A DAG object of its own: dag.test(run_conf=…) leaves the conf in the DAG's params, and the shared one's
    # later runs (test_mnist_elastic_cnn_dag.py) would wait for this landing zone.
    dag = DagBag(dag_folder=dag_bag.dag_folder).dags[MNIST]
    sensor = dag.get_task("wait_for_raw_data")
    assert sensor.mode == "reschedule"
    monkeypatch.setattr(sensor, "poke_interval", 1.0)
    landing = f"{hdfs_dir}/landing/mnist"
    pokes: list[bool] = []
    poke = sensor.poke

    def poke_then_land(context):  # the data lands right after the first poke found nothing
        pokes.append(poke(context))
        if len(pokes) == 1:
            put(f"{landing}/train-images-idx3-ubyte.gz")
        return pokes[-1]

    monkeypatch.setattr(sensor, "poke", poke_then_land)
    others = "|".join(task_id for task_id in dag.task_ids if task_id != "wait_for_raw_data")
    dag_run = dag.test(run_conf={"data_source": landing, "data_root": hdfs_dir}, mark_success_pattern=others)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states == {task_id: "success" for task_id in dag.task_ids}, states
    assert pokes == [False, True]
    [waited] = [ti for ti in dag_run.get_task_instances() if ti.task_id == "wait_for_raw_data"]
    with create_session() as session:
        reschedules = session.scalar(select(func.count()).select_from(TaskReschedule)
                                     .where(TaskReschedule.ti_id == waited.id))
    assert reschedules >= 1, "the sensor held its slot instead of being rescheduled"


# --- check_shards -------------------------------------------------------------------------------------------


def shards_location(where: str, how: str, hdfs_root: str, tmp_path) -> tuple[str, dict]:
    """The shards' URI and the params that point check_shards at it: derived from data_root, or existing_shards."""
    from cloudburst_operators import run_spec

    root = hdfs_root if where == "hdfs" else tmp_path.as_uri()
    if how == "existing_shards":
        shards = f"{root}/elsewhere/my-shards"
        params = {"existing_shards": shards, "data_root": f"{root}/data"}
    else:
        params = {"data_root": f"{root}/data"}
        shards = run_spec(context_for(**params), MNIST).shards_uri()
    assert shards.startswith(root), shards
    return shards, params


@pytest.mark.parametrize("how", ["data_root", "existing_shards"])
@pytest.mark.parametrize("where", [pytest.param("hdfs", marks=pytest.mark.hadoop), "file"])
def test_check_shards_passes_only_once_the_manifest_is_published(request, tmp_path, where, how):
    hdfs_root = request.getfixturevalue("hdfs_dir") if where == "hdfs" else ""
    shards, params = shards_location(where, how, hdfs_root, tmp_path)
    sensor, context = manifest_sensor(), context_for(**params)
    assert sensor.poke(context) is False, "nothing there yet"
    # Mid-publication: the staging sibling holds everything, manifest included, but is not renamed into place.
    parent, name = shards.rsplit("/", 1)
    staging = f"{parent}/.{name}.tmp-0123abcd"
    put(f"{staging}/shard-00000.parquet")
    put(f"{staging}/{storage.MANIFEST_NAME}", b"{}")
    assert sensor.poke(context) is False, "a staging directory is not a dataset"
    # Data files at the destination but no manifest (a copy in progress, a crashed writer): still not published.
    put(f"{shards}/shard-00000.parquet")
    put(f"{shards}/shard-00001.parquet")
    assert sensor.poke(context) is False, "files without a manifest are not a published dataset"
    put(f"{shards}/{storage.MANIFEST_NAME}", json.dumps({"kind": "image-shards", "num_shards": 2}).encode())
    assert sensor.poke(context) is True
    assert sensor.filepath == urlparse(shards).path + "/" + storage.MANIFEST_NAME


def test_check_shards_on_local_disks_never_asks_hdfs(dead_webhdfs, tmp_path):
    shards = tmp_path / "with space" / "shards"
    params = {"existing_shards": str(shards), "data_root": str(tmp_path / "data")}
    assert manifest_sensor().poke(context_for(**params)) is False
    shards.mkdir(parents=True)
    (shards / storage.MANIFEST_NAME).write_text("{}")
    assert manifest_sensor().poke(context_for(**params)) is True


# --- DAG shape ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def every_workload_dag(dag_bag):
    """The DAGs of dags/ and the toy's bundle: one per registered workload."""
    from airflow.dag_processing.dagbag import DagBag

    from training.contract import REPO_ROOT

    toy = DagBag(dag_folder=str(REPO_ROOT / "tests" / "toy_workload" / "dags"))
    assert toy.import_errors == {}
    dags = {**dag_bag.dags, **toy.dags}
    assert set(workloads.names()) <= set(dags)
    return [dags[name] for name in workloads.names()]


def test_every_workload_dag_waits_for_its_raw_data_first_and_checks_its_shards_right_before_train(
        every_workload_dag):
    from training.contract import TRAIN

    for dag in every_workload_dag:
        definition = workloads.definition(dag.dag_id)
        steps = list(definition.steps)
        assert dag.get_task("validate_run").downstream_task_ids == {"wait_for_raw_data"}, dag.dag_id
        assert dag.get_task("wait_for_raw_data").upstream_task_ids == {"validate_run"}, dag.dag_id
        assert dag.get_task("wait_for_raw_data").downstream_task_ids == {steps[0]}, dag.dag_id
        # A workload that trains in branches (speaker verification) checks each branch's shards before its train.
        branched = TRAIN in definition.branch_steps
        prefixes = [f"{branch}." for branch in definition.branches] if branched else [""]
        chain = [step for step in steps if step in definition.branch_steps] if branched else steps
        before_train = chain[chain.index(TRAIN) - 1]
        for prefix in prefixes:
            assert dag.get_task(prefix + before_train).downstream_task_ids == {prefix + "check_shards"}, dag.dag_id
            assert dag.get_task(prefix + "check_shards").downstream_task_ids == {prefix + TRAIN}, dag.dag_id
            assert dag.get_task(prefix + TRAIN).upstream_task_ids == {prefix + "check_shards"}, dag.dag_id

            wait, check = dag.get_task("wait_for_raw_data"), dag.get_task(prefix + "check_shards")
            # By name: dag.test() (above) re-imports the plugins' modules, after which isinstance() no longer holds.
            assert (type(wait).__name__, type(check).__name__) == ("LandingZoneSensor", "ManifestSensor"), \
                dag.dag_id
            assert (wait.mode, wait.poke_interval, wait.timeout) == (
                "reschedule", 30, datetime.timedelta(hours=6).total_seconds()), dag.dag_id
            assert (check.mode, check.poke_interval, check.timeout) == ("poke", 10, 600), dag.dag_id
            assert wait.webhdfs_conn_id == check.webhdfs_conn_id == "webhdfs_default"
            assert wait.workload == check.workload == dag.dag_id
            assert check.branch == prefix.rstrip(".")
