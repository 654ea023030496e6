"""The cluster of several hosts on this machine (infra/cluster/netns.sh): real network namespaces, shaped links,
real HDFS and YARN daemons on each host — brought up with two worker hosts on 100mbit links, checked from this
side as a client would (WebHDFS, the ResourceManager's REST API) and inside the hosts, then taken down.

Root only (namespaces); `make test` runs as root, so this never skips there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from namespace_cluster import MASTER, REPO_ROOT, WORKERS, client_environment, cluster, link_bytes, needs_root

from training.settings import RunSpecError

pytestmark = needs_root


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
    # A fresh HDFS: data a bench left from more hosts would re-replicate over the links the tests measure.
    wiped = cluster("wipe", timeout=120)
    assert wiped.returncode == 0, wiped.stdout + wiped.stderr
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


def test_on_a_fresh_checkout_the_commands_that_need_no_cluster_work_and_the_others_refuse_in_one_line(tmp_path):
    # A copy of infra/ alone is a checkout where no cluster ever ran: no var/cluster at all (CI's clean clone).
    shutil.copytree(REPO_ROOT / "infra", tmp_path / "infra")
    fresh = tmp_path / "infra" / "cluster" / "netns.sh"

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(fresh), *arguments], capture_output=True, text=True, timeout=60, check=False)

    cluster("down", timeout=120)  # wipe is refused while any cluster's namespaces are up
    for _ in range(2):  # nothing to wipe, and again: both succeed
        wiped = run("wipe")
        assert wiped.returncode == 0 and "Cluster data wiped (0 in var/cluster)" in wiped.stdout, wiped
    assert not (tmp_path / "var").exists()
    status = run("status")
    assert status.returncode == 3 and status.stdout.strip() == "no cluster (infra/cluster/netns.sh up)", status
    for arguments, message in [(("shape", "1gbit"), "no cluster is up"),
                               (("exec", "cb-node1", "true"), "no host cb-node1 is up (hosts up: none)"),
                               (("exec", "cb-node1"), "exec needs a host and a command"),
                               (("exec",), "exec needs a host and a command")]:
        refused = run(*arguments)
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert refused.stderr.count("\n") == 1 and message in refused.stderr, refused


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


def measured_megabits_per_second(size: int) -> float:
    """``size`` bytes from one worker host to the other over TCP, timed on the receiving side's clock."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", "cb-node1", "python3", "-c",
         "import socket; s = socket.create_server(('10.77.0.11', 5999)); s.settimeout(60); c, _ = s.accept(); "
         "c.settimeout(60); n = 0\nwhile (b := c.recv(1 << 16)): n += len(b)\nprint(n)"],
        stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    started = time.perf_counter()
    subprocess.run(["ip", "netns", "exec", "cb-node2", "python3", "-c",
                    "import socket; c = socket.create_connection(('10.77.0.11', 5999), timeout=30); "
                    f"c.sendall(bytes({size})); c.close()"], check=True, timeout=60)
    received = int(receiver.communicate(timeout=60)[0])
    seconds = time.perf_counter() - started
    assert received == size
    return received * 8 / seconds / 1e6


def test_a_link_carries_about_its_shaped_rate_and_a_reshape_takes_effect_in_place(two_hosts):
    """25 MB from one worker host to the other: both ends shaped to 100 Mbit/s. Then the running cluster's links
    re-shaped to 40 Mbit/s (a study's link profile, training.jobs.cluster_links) and back: the daemons stay."""
    from training.jobs.cluster_links import require_cluster, shape_links

    assert 60 < measured_megabits_per_second(25_000_000) < 105
    daemons = our_daemons()
    shape_links("40mbit")
    try:
        assert 24 < measured_megabits_per_second(10_000_000) < 42
        assert "links 40mbit" in cluster("status", timeout=60).stdout
    finally:
        shape_links("100mbit")
    assert our_daemons() == daemons
    require_cluster()  # every daemon still runs
    with pytest.raises(RunSpecError, match="link_rate='fast' needs the namespace cluster: LINK=fast"):
        shape_links("fast")


@pytest.fixture(scope="module")
def mnist_on_cluster(two_hosts, tmp_path_factory):
    """The cluster's client settings (netns.sh env, after spark-archive) and an MNIST slice ingested, augmented and
    sharded on its HDFS through YARN, as a user runs the steps: (environment, spec)."""
    from training.config import RunSpec

    archive = cluster("spark-archive", timeout=900)
    assert archive.returncode == 0, archive.stderr
    environment = {**os.environ, "CLOUDBURST_SPARK_PROGRESS": "false", **client_environment()}
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
    environment, data = mnist_on_cluster
    # Downpour also names the link rate the cluster already has: the train step re-shapes before it trains.
    spec = data.with_changes(strategy=strategy, run_name=f"netns-{strategy}",
                             link_rate="100mbit" if strategy == "downpour" else "")
    before = {host: link_bytes(host) for host in WORKERS}
    step_on_cluster("train", spec, environment)
    carried = {host: link_bytes(host) - before[host] for host in WORKERS}
    run = tracked_run(spec)
    assert run.data.tags["spark_master"] == "yarn"
    assert run.data.params["link_rate"] == spec.link_rate
    moved = run.data.metrics["bytes_moved"]
    if strategy == "downpour":
        assert moved > 0 and sum(carried.values()) >= 0.9 * moved
    else:  # ring all-reduce of two: each worker sends and receives its gradients (float32) every step
        from training.workload_registry import workload_for

        parameters = workload_for(spec).build_model().count_params()
        assert moved == 2 * 4 * parameters * int(run.data.tags["steps_per_epoch"]) * spec.epochs
    print(f"{strategy}: {moved / 1e6:.1f} MB moved; on the links: " +
          ", ".join(f"{host} {count / 1e6:.1f} MB" for host, count in carried.items()))
    assert all(count >= 0.3 * moved for count in carried.values()), carried  # a worker on each host


@pytest.mark.timeout(900)
def test_a_ceiling_on_the_cluster_returns_its_workers_model_to_the_driver(mnist_on_cluster):
    """Downpour with communication off: worker 0 sends its weight snapshots (several MB) back as its Spark task's
    result. Over Spark's 1 MB default such a result was left on the executor for the driver to fetch by host
    name, which this side cannot resolve (cb-node2): the study's ceiling failed on the cluster (2026-12-03)."""
    environment, data = mnist_on_cluster
    spec = data.with_changes(strategy="downpour", communication=False, run_name="netns-ceiling")
    step_on_cluster("train", spec, environment)
    run = tracked_run(spec)
    assert run.data.params["communication"] == "false" and run.data.metrics.get("bytes_moved", 0) == 0
    assert run.data.metrics["val_accuracy"] > 0.3


@pytest.mark.timeout(900)
def test_one_horovod_worker_alone_on_a_host_finds_the_rendezvous_on_this_side(mnist_on_cluster):
    """The speedup baseline on the cluster (1 × 1). With a single task Horovod may take any of its interfaces for the
    rendezvous, loopback included, and the rank then asks its own namespace's 127.0.0.1 and aborts; the driver's
    explicit address names the interface (placement.horovod_interfaces)."""
    environment, data = mnist_on_cluster
    # On the two workers' shards already there (existing_shards): a shard job of its own would add a YARN
    # application (about 25 s) and test nothing this test is about.
    spec = data.with_changes(strategy="horovod", nodes=1, epochs=1, run_name="netns-1x1",
                             existing_shards=data.shards_uri())
    step_on_cluster("train", spec, environment)
    run = tracked_run(spec)
    assert (run.data.tags["spark_master"], run.data.tags["total_workers"]) == ("yarn", "1")
    assert run.data.metrics["samples_per_second_mean"] > 0


def live_datanodes() -> int:
    state = get_json(f"http://{MASTER}:9870/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")
    return int(state["beans"][0]["NumLiveDataNodes"])


class Writer(threading.Thread):
    """Writes 256 KB files, one every 0.2 s or so, into a directory until stopped; records what failed."""

    def __init__(self, uri: str) -> None:
        super().__init__(name="hdfs-writer", daemon=True)
        from training import storage

        self.where = storage.resolve(uri)
        self.stop, self.written, self.failures = threading.Event(), 0, []

    @staticmethod
    def content(index: int) -> bytes:
        return index.to_bytes(4, "big") * (1 << 16)

    def run(self) -> None:
        self.where.fs.makedirs(self.where.path, exist_ok=True)
        while not self.stop.is_set():
            try:
                with self.where.fs.open(f"{self.where.path}/file-{self.written:04d}", "wb") as handle:
                    handle.write(self.content(self.written))
            except Exception as error:  # noqa: BLE001 - the test reports every failure
                self.failures.append(f"file-{self.written:04d}: {error}")
            self.written += 1
            self.stop.wait(0.2)


@pytest.mark.timeout(900)
def test_a_killed_datanode_loses_nothing_and_a_rerun_publishes_nothing_twice(mnist_on_cluster, caplog):
    """Fault: one worker host's DataNode killed (SIGKILL) while files are being written. At once, while the NameNode
    still names it, every dataset file reads byte for byte (Python's WebHDFS client skips the dead DataNode for the
    other replica, as Hadoop's does) and re-running the shard step finds its dataset published and changes
    nothing. Every write succeeds: one the NameNode sends to the dead DataNode, or that it dies in, goes again to
    the other under a new name (the dead writer's lease holds the first name for a minute). The NameNode declares
    it dead within about a minute (heartbeat recheck 10 s on this cluster). `up` heals it."""
    from training import sharding, storage

    environment, spec = mnist_on_cluster
    os.environ.setdefault("CLOUDBURST_WEBHDFS_PORT", environment["CLOUDBURST_WEBHDFS_PORT"])
    published = storage.require_manifest(spec.shards_uri())
    victim = "cb-node2"
    [pid] = [line.split()[0] for line in our_daemons()
             if f"-Dcloudburst.host={victim} " in line + " " and "-Dproc_datanode" in line]
    writer = Writer(storage.join(spec.data_root, "written-during-the-fault"))
    writer.start()
    deadline = time.monotonic() + 60
    while writer.written < 3:
        assert time.monotonic() < deadline and not writer.failures, writer.failures
        time.sleep(0.2)
    killed = time.monotonic()
    os.kill(int(pid), 9)
    for rank in range(spec.total_workers):  # every shard, from the surviving replica
        batch = sharding.read_worker_images(spec.shards_uri(), rank, spec.total_workers)
        assert len(batch.labels) > 0
    for uri in (spec.raw_uri(), spec.augmented_uri(), spec.shards_uri()):  # every file, byte for byte
        where = storage.resolve(uri)
        listed = storage.require_manifest(uri)["files"]
        assert listed
        for name, digest in listed.items():
            assert storage.file_digest(where.fs, f"{where.path}/{name}") == digest, (uri, name)
    read_all = time.monotonic() - killed
    assert live_datanodes() == 2, "read after the NameNode declared the DataNode dead: failover was not tested"
    step_on_cluster("shard", spec, environment)  # a re-run: already published, nothing written
    assert storage.require_manifest(spec.shards_uri()) == published
    while live_datanodes() > 1:
        assert time.monotonic() - killed < 180, "the NameNode still counts the killed DataNode as live"
        time.sleep(2)
    detected = time.monotonic() - killed
    writer.stop.set()
    writer.join(timeout=300)
    assert not writer.is_alive() and writer.failures == [], writer.failures
    retried = [record for record in caplog.records if "sending the file again under a new name" in record.message]
    assert retried, "no write went to the dead DataNode: the retry was not tested"
    files = writer.where.fs.ls(writer.where.path, detail=False)
    assert sorted(path.rsplit("/", 1)[1] for path in files) == [f"file-{i:04d}" for i in range(writer.written)]
    for index in range(writer.written):
        assert writer.where.fs.cat_file(f"{writer.where.path}/file-{index:04d}") == Writer.content(index), index
    healed = cluster("up", "2", "100mbit")
    assert healed.returncode == 0 and live_datanodes() == 2, healed.stdout + healed.stderr
    print(f"DataNode on {victim} killed: every file read back in {read_all:.0f} s while it was still listed; "
          f"{writer.written} files written meanwhile, {len(retried)} of them again after the dead DataNode "
          f"failed; declared dead after {detected:.0f} s; nothing lost; healed by up")


def host_pids(host: str) -> list[int]:
    listed = subprocess.run(["ip", "netns", "pids", host], capture_output=True, text=True, check=False).stdout
    return [int(pid) for pid in listed.split()]


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def train_in_background(spec, environment: dict[str, str], log: Path) -> subprocess.Popen:
    command = str(Path(sys.executable).parent / "cloudburst")
    with log.open("w") as output:
        return subprocess.Popen([command, "train", *spec.to_args()], stdout=output, stderr=subprocess.STDOUT,
                                env=environment)


def wait_until_training_on(host: str, process: subprocess.Popen, log: Path, seconds: float = 300,
                           marker: str = "downpour_worker") -> None:
    """Until a training process (its command line holds the marker) runs on the host, and a few seconds more."""
    deadline = time.monotonic() + seconds
    while not any(marker in command_line(pid) for pid in host_pids(host)):
        assert process.poll() is None, f"train ended before a worker ran on {host}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {marker} process on {host} after {seconds:.0f} s"
        time.sleep(0.5)
    time.sleep(5)  # into its first steps: fetched the parameters, pushing


def ended(process: subprocess.Popen, log: Path, seconds: float, what: str) -> int:
    """The process's exit status, waiting at most ``seconds``; a process still running then is killed and the
    test fails with its log's tail (a hang is a failure, never a wait without end)."""
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"{what} still running after {seconds:.0f} s:\n{log.read_text()[-3000:]}") from None


def tracked_run(spec):
    """The run's one MLflow run (found by its run name)."""
    import mlflow

    client = mlflow.MlflowClient(spec.tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name(spec.workload).experiment_id],
                               f"tags.mlflow.runName LIKE '%{spec.run_name}'")
    return run


def finished_run(process: subprocess.Popen, log: Path, spec, seconds: float):
    assert ended(process, log, seconds, "train") == 0, log.read_text()[-4000:]
    return tracked_run(spec)


def node_state(host: str) -> str:
    nodes = get_json(f"http://{MASTER}:8088/ws/v1/cluster/nodes?states=NEW,RUNNING,UNHEALTHY,LOST,SHUTDOWN,"
                     "DECOMMISSIONED,REBOOTED")["nodes"] or {"node": []}
    return next((node["state"] for node in nodes["node"] if node["nodeHostName"] == host), "UNKNOWN")


@pytest.mark.timeout(900)
def test_a_link_cut_for_30_s_mid_downpour_stalls_neither_the_server_nor_the_run(whole_cluster, tmp_path):
    """Fault: one worker host's link down for 30 s mid-Downpour (`ip link set … down` on the bridge's end). The
    other host's worker keeps exchanging with the parameter server the whole time (bytes on its link); the cut
    one's calls stall, then either resume (TCP retransmits, its calls time out only after 60 s) or it is counted
    lost; the run finishes either way."""
    environment, data = whole_cluster
    spec = data.with_changes(strategy="downpour", epochs=20, run_name="netns-link-cut")
    log = tmp_path / "train.log"
    process = train_in_background(spec, environment, log)
    victim, survivor = "cb-node2", "cb-node1"
    wait_until_training_on(victim, process, log)
    before = link_bytes(survivor)
    subprocess.run(["ip", "link", "set", f"v-{victim}", "down"], check=True)
    try:
        time.sleep(30)
        during_cut = link_bytes(survivor) - before
        still_training = process.poll() is None
    finally:
        subprocess.run(["ip", "link", "set", f"v-{victim}", "up"], check=True)
    assert still_training, "training ended during the cut: the cut tested nothing"
    run = finished_run(process, log, spec, seconds=600)
    lost = int(run.data.metrics["lost_workers"])
    print(f"link of {victim} cut 30 s: {survivor}'s link carried {during_cut / 1e6:.1f} MB meanwhile; "
          f"{lost} worker(s) lost; accuracy {run.data.metrics['val_accuracy']:.3f}")
    assert during_cut > 1e6, "the parameter server stopped serving the other host during the cut"
    assert lost in (0, 1) and run.data.metrics["val_accuracy"] > 0.1
    assert node_state(victim) == "RUNNING"  # the NodeManager rode the cut out (declared lost only after 45 s)


@pytest.mark.timeout(1200)
def test_a_host_lost_mid_downpour_loses_only_its_worker(whole_cluster, tmp_path):
    """Fault: every process of one worker host killed mid-Downpour (DataNode, NodeManager, the Spark executor and
    its worker), as if it crashed. The other worker trains on; YARN declares the host lost after 45 s and Spark
    fails its task, whose retry reports the worker lost instead of training again. The run completes with
    lost_workers = 1 and its accuracy; checkpoints are still written (HDFS skips the dead DataNode). `up` heals
    the host.

    The victim is the worker host without the run's YARN application master: losing that one ends the whole
    application (YARN starts a new master attempt and kills the old attempt's containers, the survivor's too), so
    the run fails and its retry resumes from the checkpoint, as with Horovod (README, faults)."""
    environment, data = whole_cluster
    spec = data.with_changes(strategy="downpour", epochs=40, run_name="netns-host-lost")
    log = tmp_path / "train.log"
    process = train_in_background(spec, environment, log)
    wait_until_training_on("cb-node1", process, log)
    wait_until_training_on("cb-node2", process, log, seconds=30)
    [application] = [app for app in yarn_applications() if app["state"] == "RUNNING"]
    master_host = application["amHostHttpAddress"].split(":")[0]
    [victim] = [host for host in WORKERS if host != master_host]
    assert any("downpour_worker" in command_line(pid) for pid in host_pids(victim)), "its worker already ended"
    killed = time.monotonic()
    kill_host(victim)
    spark_noticed = None
    while process.poll() is None and time.monotonic() - killed < 600:
        if spark_noticed is None and "Lost executor" in log.read_text(errors="replace"):
            spark_noticed = time.monotonic() - killed
        time.sleep(1)
    ended = time.monotonic() - killed
    run = finished_run(process, log, spec, seconds=30)
    noticed = f"{spark_noticed:.0f} s" if spark_noticed is not None else "the end of the run"
    print(f"{victim} killed mid-Downpour: Spark reported its executor lost after {noticed}; the run ended "
          f"{ended:.0f} s after the kill; lost_workers {run.data.metrics['lost_workers']:.0f} (ranks "
          f"{run.data.tags.get('lost_worker_ranks')}); accuracy {run.data.metrics['val_accuracy']:.3f}")
    assert run.data.metrics["lost_workers"] == 1 and run.data.metrics["val_accuracy"] > 0.1
    assert "lost with its executor" in log.read_text()
    heal()


def heal() -> None:
    """`up` again: every daemon a fault killed restarted, both DataNodes live and both NodeManagers RUNNING; this
    process checks the (maybe restarted) NameNode afresh."""
    from training import storage

    healed = cluster("up", "2", "100mbit")
    assert healed.returncode == 0 and live_datanodes() == 2, healed.stdout + healed.stderr
    deadline = time.monotonic() + 120
    while any(node_state(host) != "RUNNING" for host in WORKERS):
        assert time.monotonic() < deadline, {host: node_state(host) for host in WORKERS}
        time.sleep(2)
    storage._checked_namenodes.clear()


@pytest.fixture
def whole_cluster(mnist_on_cluster):
    """The MNIST slice on the cluster, with every daemon of both hosts running (an earlier fault healed)."""
    heal()
    return mnist_on_cluster


def kill_host(host: str) -> None:
    """Every process of the host, as if it crashed (its namespace and addresses stay, answering nothing)."""
    for pid in host_pids(host):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@pytest.mark.timeout(1800)
def test_a_host_lost_mid_horovod_fails_the_step_in_bounded_time_and_the_retry_resumes(whole_cluster, tmp_path):
    """Fault: one worker host killed mid-Horovod, after at least one epoch's checkpoint. Synchronous training
    cannot go on without a rank: the train step fails (bounded: the survivor's Gloo calls fail when the dead
    peer's connections close); once `up` has brought the host back, the step run again (what Airflow's retry
    does) resumes from the newest checkpoint, losing at most the epoch in flight."""
    from training.strategies.checkpoints import CheckpointStore

    environment, data = whole_cluster
    os.environ.setdefault("CLOUDBURST_WEBHDFS_PORT", environment["CLOUDBURST_WEBHDFS_PORT"])
    spec = data.with_changes(strategy="horovod", epochs=20, run_name="netns-horovod-host-lost")
    log = tmp_path / "train.log"
    process = train_in_background(spec, environment, log)
    victim = "cb-node2"
    wait_until_training_on(victim, process, log, marker="gloo_exec_fn")
    checkpoints = CheckpointStore(spec.run_uri())
    deadline = time.monotonic() + 300
    while not checkpoints.latest_epoch():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(1)
    saved_before_kill = checkpoints.latest_epoch()
    killed = time.monotonic()
    kill_host(victim)
    assert ended(process, log, 600, "Horovod, after losing a host,") == 1
    failed_after = time.monotonic() - killed
    saved = checkpoints.latest_epoch()
    last_line = log.read_text().strip().splitlines()[-1]
    assert "Horovod's job ended when a rank exited" in last_line and f"Checkpoints keep {saved} of" in last_line
    assert saved_before_kill <= saved < spec.epochs
    heal()
    output = step_on_cluster("train", spec, environment)  # the retry
    assert f"resumed after epoch {saved} " in output, output[-3000:]
    assert tracked_run(spec).data.metrics["resumed_from_epoch"] == saved
    print(f"{victim} killed mid-Horovod after epoch {saved_before_kill}'s checkpoint: the step failed "
          f"{failed_after:.0f} s later ({last_line[:200]!r}); the retry "
          f"resumed after epoch {saved} and finished")


@pytest.mark.timeout(1200)
def test_a_namenode_killed_mid_publish_leaves_no_half_dataset_and_the_retry_publishes_once(whole_cluster,
                                                                                          tmp_path):
    """Fault: the NameNode killed (SIGKILL) while the shard step writes a new dataset through YARN. The step fails
    within a bounded time; after `up` restarts the NameNode nothing is visible at the destination (the parts
    written so far sit in a hidden staging sibling without a manifest); the step retried publishes the dataset
    once, and again changes nothing."""
    from training import storage

    environment, data = whole_cluster
    os.environ.setdefault("CLOUDBURST_WEBHDFS_PORT", environment["CLOUDBURST_WEBHDFS_PORT"])
    spec = data.with_changes(workers_per_node=2)  # shards of the same data not published yet: 4 of them
    destination = storage.resolve(spec.shards_uri())
    parent, name = destination.path.rstrip("/").rsplit("/", 1)
    assert storage.read_manifest(spec.shards_uri()) is None
    log = tmp_path / "shard.log"
    command = str(Path(sys.executable).parent / "cloudburst")
    with log.open("w") as output:
        process = subprocess.Popen([command, "shard", *spec.to_args()], stdout=output, stderr=subprocess.STDOUT,
                                   env=environment)

    def staging_files() -> int:
        siblings = get_json(f"http://{MASTER}:9870/webhdfs/v1{parent}?op=LISTSTATUS&user.name=root")
        staging = [entry["pathSuffix"] for entry in siblings["FileStatuses"]["FileStatus"]
                   if entry["pathSuffix"].startswith(f".{name}.tmp-")]
        return sum(len(list(destination.fs.find(f"{parent}/{entry}"))) for entry in staging)

    deadline = time.monotonic() + 300
    while staging_files() == 0:  # Spark has begun writing the dataset's parts
        assert process.poll() is None, f"shard ended before it wrote anything:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "shard wrote nothing within 300 s"
        time.sleep(0.2)
    [pid] = [line.split()[0] for line in our_daemons() if "-Dproc_namenode" in line]
    killed = time.monotonic()
    os.kill(int(pid), 9)
    assert ended(process, log, 600, "shard, without its NameNode,") != 0, "shard published, its NameNode dead"
    failed_after = time.monotonic() - killed
    heal()
    restarted = time.monotonic() - killed
    assert storage.read_manifest(spec.shards_uri()) is None
    assert not destination.fs.exists(destination.path), "something is visible at the destination"
    step_on_cluster("shard", spec, environment)  # the retry
    published = storage.require_manifest(spec.shards_uri())
    for relative, digest in published["files"].items():
        assert storage.file_digest(destination.fs, f"{destination.path}/{relative}") == digest
    step_on_cluster("shard", spec, environment)  # and once more: nothing to do
    assert storage.require_manifest(spec.shards_uri()) == published
    print(f"NameNode killed mid-publish: the step failed {failed_after:.0f} s later (last line: "
          f"{log.read_text().strip().splitlines()[-1][:160]!r}); cluster whole again (`up`) {restarted:.0f} s "
          f"after the kill; nothing visible; the retry published {len(published['files'])} files once")


def yarn_applications() -> list[dict]:
    found = get_json(f"http://{MASTER}:8088/ws/v1/cluster/apps?states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING")
    return (found.get("apps") or {}).get("app", [])


@pytest.mark.timeout(1500)
def test_two_workloads_train_at_once_apart_and_yarn_queues_what_does_not_fit(whole_cluster, tmp_path):
    """Concurrency: MNIST (Downpour) and the toy workload (Horovod) train on the cluster at the same time, each
    needing an executor on both hosts. Two apps' executors do not fit (4,096 MB per host: one executor of
    2 GB + overhead and one application master), so YARN holds the second app's executors until the first app
    releases its own; the second waits for them (bounded: $CLOUDBURST_EXECUTOR_WAIT_S, 120 s, then a clear
    error, never a hang). Both finish; their run directories and MLflow runs hold only their own."""
    import mlflow

    environment, mnist = whole_cluster
    mnist_run = mnist.with_changes(strategy="downpour", epochs=20, run_name="netns-together-mnist")
    toy_environment = {**environment, "CLOUDBURST_WORKLOADS": "toy_workload",
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "tests"),
                                                                   environment.get("PYTHONPATH")]))}
    toy_arguments = ["--workload", "toy_dense", "--nodes", "2", "--workers-per-node", "1", "--strategy", "horovod",
                     "--epochs", "20", "--spark-master", "yarn", "--data-root", mnist.data_root,
                     "--tracking-uri", mnist.tracking_uri, "--run-name", "netns-together-toy"]
    command = str(Path(sys.executable).parent / "cloudburst")
    for step in ("ingest", "shard"):
        prepared = subprocess.run([command, step, *toy_arguments], capture_output=True, text=True, timeout=900,
                                  env=toy_environment, check=False)
        assert prepared.returncode == 0, f"toy {step}:\n{prepared.stderr[-3000:]}"
    mnist_log, toy_log = tmp_path / "mnist.log", tmp_path / "toy.log"
    started = time.monotonic()
    first = train_in_background(mnist_run, environment, mnist_log)
    time.sleep(15)  # as two DAG runs start: not in the same second (see the README on partial allocations)
    with toy_log.open("w") as output:
        second = subprocess.Popen([command, "train", *toy_arguments], stdout=output, stderr=subprocess.STDOUT,
                                  env=toy_environment)
    most_at_once, waiting_seen = 0, False
    while (first.poll() is None or second.poll() is None) and time.monotonic() - started < 1200:
        applications = [app for app in yarn_applications() if app["state"] == "RUNNING"]
        most_at_once = max(most_at_once, len(applications))
        # An app holding only its master (one container) while another runs: YARN is holding its executors back.
        waiting_seen |= len(applications) == 2 and min(app["runningContainers"] for app in applications) == 1
        time.sleep(1)
    elapsed = time.monotonic() - started
    for process, log in ((first, mnist_log), (second, toy_log)):
        assert ended(process, log, 60, "train") == 0, log.read_text()[-4000:]
    client = mlflow.MlflowClient(mnist.tracking_uri)
    for workload, run_name, strategy in (("mnist_elastic_cnn", "netns-together-mnist", "downpour"),
                                         ("toy_dense", "netns-together-toy", "horovod")):
        experiment = client.get_experiment_by_name(workload)
        runs = client.search_runs([experiment.experiment_id], f"tags.mlflow.runName LIKE '%{run_name}'")
        assert len(runs) == 1 and runs[0].data.params["strategy"] == strategy, (workload, runs)
        assert runs[0].data.params["workload"] == workload
    print(f"MNIST/Downpour and toy/Horovod at once: both finished in {elapsed:.0f} s; at most {most_at_once} "
          f"applications running at once; one held back to its master while the other ran: {waiting_seen}")
    assert most_at_once == 2 and waiting_seen


def test_down_removes_everything_and_is_idempotent_and_only_then_may_the_data_be_wiped(two_hosts):
    state = REPO_ROOT / "var" / "cluster"
    refused = cluster("wipe", timeout=30)
    assert refused.returncode != 0 and "the cluster is up" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert (state / "cb-master" / "data" / "namenode" / "current" / "VERSION").is_file()
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
    assert (state / "cb-node1" / "data").is_dir()  # down keeps the data
    wiped = cluster("wipe", timeout=60)
    assert wiped.returncode == 0, wiped.stderr
    assert not list(state.glob("cb-*")) and not (state / "client").exists()
