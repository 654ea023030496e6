"""The cluster of several hosts on this machine (infra/cluster/netns.sh): real network namespaces, shaped links,
real HDFS and YARN daemons on each host — brought up with two worker hosts on 100mbit links, checked from this
side as a client would (WebHDFS, the ResourceManager's REST API) and inside the hosts, then taken down.

Root only (namespaces); `make test` runs as root, so this never skips there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "infra" / "cluster" / "netns.sh"
MASTER = "10.77.0.10"
WORKERS = {"cb-node1": "10.77.0.11", "cb-node2": "10.77.0.12"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CLOUDBURST_REQUIRE_HADOOP"),
                                reason="network namespaces need root")


def cluster(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *arguments], capture_output=True, text=True, timeout=timeout, check=False)


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.startswith("cb-")}


def our_daemons() -> list[str]:
    found = subprocess.run(["pgrep", "-af", "--", f"-Dcloudburst.cluster={REPO_ROOT}"], capture_output=True, text=True,
                           check=False).stdout
    return [line for line in found.splitlines() if "java" in line]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def two_hosts():
    cluster("down", timeout=120)
    up = cluster("up", "2", "100mbit")
    assert up.returncode == 0, up.stdout + up.stderr
    yield up.stdout
    down = cluster("down", timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr


@pytest.mark.parametrize(("arguments", "message"), [(("up", "0"), "NODES=0"), (("up", "9"), "NODES=9"),
                                                    (("up", "2", "fast"), "LINK=fast"),
                                                    (("up", "2", "500gbit"), "LINK=500gbit")])
def test_bad_shapes_are_refused_in_one_line_before_anything_is_made(arguments, message):
    before = namespaces()
    result = cluster(*arguments, timeout=30)
    assert result.returncode != 0 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert namespaces() == before


@pytest.mark.timeout(900)
def test_two_worker_hosts_hold_every_block_twice_and_run_a_nodemanager_each(two_hosts, tmp_path):
    status = cluster("status", timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert namespaces() == {"cb-master", *WORKERS}
    # A file written from this side through WebHDFS: the NameNode redirects to a DataNode by its own address.
    payload = os.urandom(3 * 1024 * 1024)
    create = urllib.request.Request(f"http://{MASTER}:9870/webhdfs/v1/netns-test/blob?op=CREATE&overwrite=true"
                                    "&user.name=root", method="PUT")
    with pytest.raises(urllib.error.HTTPError) as redirect:  # 307: the DataNode to send the bytes to
        opener = urllib.request.build_opener(NoRedirect)
        opener.open(create, timeout=10)
    location = redirect.value.headers["Location"]
    assert any(address in location for address in WORKERS.values()), location
    upload = urllib.request.Request(location, data=payload, method="PUT")
    with urllib.request.urlopen(upload, timeout=60) as response:
        assert response.status == 201
    with urllib.request.urlopen(f"http://{MASTER}:9870/webhdfs/v1/netns-test/blob?op=OPEN&user.name=root",
                                timeout=60) as response:
        assert response.read() == payload
    locations = get_json(f"http://{MASTER}:9870/webhdfs/v1/netns-test/blob?op=GETFILEBLOCKLOCATIONS"
                         "&user.name=root")["BlockLocations"]["BlockLocation"]
    for block in locations:  # replication 2 on two hosts: every block on both
        assert sorted(name.split(":")[0] for name in block["names"]) == sorted(WORKERS.values()), block
    nodes = get_json(f"http://{MASTER}:8088/ws/v1/cluster/nodes?states=RUNNING")["nodes"]["node"]
    assert sorted(node["nodeHostName"] for node in nodes) == sorted(WORKERS)  # each host by its own name
    assert {node["totalResource"]["vCores"] for node in nodes} == {2}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *arguments, **keywords):  # noqa: ANN002, ANN003 - urllib's signature
        return None


def test_each_host_has_its_own_name_and_cpu_share_and_the_daemons_run_inside_it(two_hosts):
    for host in ("cb-master", *WORKERS):
        pids = [line.split()[0] for line in our_daemons() if f"-Dcloudburst.host={host} " in line + " "]
        assert len(pids) == 2, (host, our_daemons())
        for pid in pids:
            name = subprocess.run(["nsenter", "-t", pid, "-u", "hostname"], capture_output=True, text=True,
                                  check=True).stdout.strip()
            assert name == host
            assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink(f"/proc/{pids[0]}/ns/net")
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
            if host in WORKERS and Path("/sys/fs/cgroup/cpu/cgroup.procs").exists():
                group = f"/sys/fs/cgroup/cpu/cloudburst-{host}"
                assert pid in Path(group, "cgroup.procs").read_text().split()
                share = int(Path(group, "cpu.cfs_quota_us").read_text()) / int(
                    Path(group, "cpu.cfs_period_us").read_text())
                assert share == pytest.approx(os.cpu_count() / len(WORKERS))


def test_a_link_carries_about_its_shaped_rate(two_hosts):
    """25 MB from one worker host to the other over TCP: both ends shaped to 100 Mbit/s."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", "cb-node1", "python3", "-c",
         "import socket; s = socket.create_server(('10.77.0.11', 5999)); s.settimeout(60); c, _ = s.accept(); "
         "c.settimeout(60); n = 0\nwhile (b := c.recv(1 << 16)): n += len(b)\nprint(n)"],
        stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    started = time.perf_counter()
    subprocess.run(["ip", "netns", "exec", "cb-node2", "python3", "-c",
                    "import socket; c = socket.create_connection(('10.77.0.11', 5999), timeout=30); "
                    "c.sendall(bytes(25_000_000)); c.close()"], check=True, timeout=60)
    received = int(receiver.communicate(timeout=60)[0])
    seconds = time.perf_counter() - started
    megabits_per_second = received * 8 / seconds / 1e6
    assert received == 25_000_000
    assert 60 < megabits_per_second < 105, megabits_per_second


def link_bytes(host: str) -> int:
    """Bytes through a host's link so far, both directions (the bridge end of its veth pair)."""
    statistics = Path(f"/sys/class/net/v-{host}/statistics")
    return int((statistics / "rx_bytes").read_text()) + int((statistics / "tx_bytes").read_text())


@pytest.fixture(scope="module")
def mnist_on_cluster(two_hosts, tmp_path_factory):
    """The cluster's client settings (netns.sh env, after spark-archive) and an MNIST slice ingested, augmented and
    sharded on its HDFS through YARN, as a user runs the steps: (environment, spec)."""
    from training.config import RunSpec

    archive = cluster("spark-archive", timeout=900)
    assert archive.returncode == 0, archive.stderr
    environment = {**os.environ, "CLOUDBURST_SPARK_PROGRESS": "false"}
    for line in cluster("env", timeout=30).stdout.splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        environment[name] = value.strip("'")
    assert environment["CLOUDBURST_SPARK_YARN_ARCHIVE"].startswith(f"hdfs://{MASTER}:8020/")
    spec = RunSpec(train_limit=600, test_limit=200, nodes=2, workers_per_node=1, epochs=2, batch_size_per_worker=32,
                   spark_master="yarn", data_root=f"{environment['CLOUDBURST_HDFS_URI']}/cloudburst-tests/"
                   f"netns-{os.getpid()}", tracking_uri=f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db")
    for step in ("ingest", "augment", "shard"):
        step_on_cluster(step, spec, environment)
    return environment, spec


def step_on_cluster(step: str, spec, environment: dict[str, str]) -> str:
    command = str(Path(sys.executable).parent / "cloudburst")
    result = subprocess.run([command, step, *spec.to_args()], capture_output=True, text=True, timeout=900,
                            env=environment, check=False)
    assert result.returncode == 0, f"{step}:\n{result.stderr[-4000:]}"
    return result.stdout + result.stderr


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("strategy", ["downpour", "horovod"])
def test_training_runs_on_both_hosts_through_yarn_and_its_traffic_crosses_their_links(mnist_on_cluster, strategy):
    """The pipeline unchanged, with the cluster's client settings: training with nodes=2, one worker on each host.
    Downpour (its parameter server on this side): the links carry at least the bytes_moved it counts. Horovod: the
    Gloo ring between the two hosts carries at least each step's gradients both ways."""
    import mlflow

    environment, data = mnist_on_cluster
    spec = data.with_changes(strategy=strategy, run_name=f"netns-{strategy}")
    before = {host: link_bytes(host) for host in WORKERS}
    step_on_cluster("train", spec, environment)
    carried = {host: link_bytes(host) - before[host] for host in WORKERS}
    client = mlflow.MlflowClient(spec.tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name(spec.workload).experiment_id],
                               f"tags.mlflow.runName LIKE '%{spec.run_name}'")
    assert run.data.tags["spark_master"] == "yarn"
    if strategy == "downpour":
        moved = run.data.metrics["bytes_moved"]
        assert moved > 0 and sum(carried.values()) >= 0.9 * moved
    else:  # ring all-reduce of two: each worker sends and receives its gradients (float32) every step
        from training.workloads import workload_for

        parameters = workload_for(spec).build_model().count_params()
        moved = 2 * 4 * parameters * int(run.data.tags["steps_per_epoch"]) * spec.epochs
    print(f"{strategy}: {moved / 1e6:.1f} MB moved; on the links: " +
          ", ".join(f"{host} {count / 1e6:.1f} MB" for host, count in carried.items()))
    assert all(count >= 0.3 * moved for count in carried.values()), carried  # a worker on each host


def live_datanodes() -> int:
    state = get_json(f"http://{MASTER}:9870/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")
    return int(state["beans"][0]["NumLiveDataNodes"])


@pytest.mark.timeout(900)
def test_a_killed_datanode_loses_nothing_and_a_rerun_publishes_nothing_twice(mnist_on_cluster):
    """Fault: one worker host's DataNode killed (SIGKILL). The NameNode declares it dead (heartbeat recheck 10 s
    on this cluster: within about a minute), every dataset file and checkpoint still reads from the other
    replica, and re-running the shard step finds its dataset published and changes nothing. `up` heals it."""
    from training import sharding, storage

    environment, spec = mnist_on_cluster
    os.environ.setdefault("CLOUDBURST_WEBHDFS_PORT", environment["CLOUDBURST_WEBHDFS_PORT"])
    published = storage.require_manifest(spec.shards_uri())
    victim = "cb-node2"
    [pid] = [line.split()[0] for line in our_daemons()
             if f"-Dcloudburst.host={victim} " in line + " " and "-Dproc_datanode" in line]
    killed = time.monotonic()
    os.kill(int(pid), 9)
    while live_datanodes() > 1:
        assert time.monotonic() - killed < 180, "the NameNode still counts the killed DataNode as live"
        time.sleep(2)
    detected = time.monotonic() - killed
    # The NameNode drops the dead node's replicas on its next heartbeat check (up to 10 s later). Until then a
    # WebHDFS read may be sent to the dead DataNode: Python's WebHDFS reads do not fail over between replicas the
    # way Hadoop's own client does (the JVM steps on YARN do), so reading starts once the replicas are gone.
    where = storage.resolve(spec.shards_uri())
    files = [path for path in where.fs.find(where.path) if path.endswith(".parquet")]
    victim_address = WORKERS[victim]
    while any(victim_address in json.dumps(get_json(f"http://{MASTER}:9870/webhdfs/v1{path}?op=GETFILEBLOCKLOCATIONS"
                                                    "&user.name=root")) for path in files):
        assert time.monotonic() - killed < 240, "the dead DataNode's replicas are still listed"
        time.sleep(2)
    dropped = time.monotonic() - killed
    for rank in range(spec.total_workers):  # every shard, every byte, from the surviving replica
        batch = sharding.read_worker_images(spec.shards_uri(), rank, spec.total_workers)
        assert len(batch.labels) > 0
    for uri in (spec.raw_uri(), spec.augmented_uri(), spec.shards_uri()):  # every file, byte for byte
        where = storage.resolve(uri)
        listed = storage.require_manifest(uri)["files"]
        assert listed
        for name, digest in listed.items():
            assert storage.file_digest(where.fs, f"{where.path}/{name}") == digest, (uri, name)
    step_on_cluster("shard", spec, environment)  # a re-run: already published, nothing written
    assert storage.require_manifest(spec.shards_uri()) == published
    healed = cluster("up", "2", "100mbit")
    assert healed.returncode == 0 and live_datanodes() == 2, healed.stdout + healed.stderr
    print(f"DataNode on {victim} killed: declared dead after {detected:.0f} s, its replicas dropped after "
          f"{dropped:.0f} s; nothing lost; healed by up")


def test_down_removes_everything_and_is_idempotent(two_hosts):
    down = cluster("down", timeout=180)
    assert down.returncode == 0, down.stderr
    assert namespaces() == set() and our_daemons() == []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert " cb0:" not in links and "v-cb-" not in links
    assert not list(Path("/sys/fs/cgroup/cpu").glob("cloudburst-cb-*"))
    assert not list(Path("/etc/netns").glob("cb-*"))  # (an absent /etc/netns globs to nothing)
    again = cluster("down", timeout=60)
    assert again.returncode == 0
    assert cluster("status", timeout=30).returncode == 3
