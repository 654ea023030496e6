"""Elephas as a benchmark peer: the Spark + Keras library trains the same model on the same shards as our strategies.

Elephas never becomes a project dependency. ``ensure_environment()`` builds a throwaway virtual environment under
``var/bench/elephas-venv`` that sees the training environment's packages (TensorFlow 2.15.1 / Keras 2, pyspark,
numpy, the ``training`` package) through a ``.pth`` file and adds only what ``bench/elephas-requirements.txt``
pins: Elephas 6.2.1 (the last release for Keras 2; 7.x needs Keras 3) without its dependencies, and Flask for its
HTTP parameter server. ``run_elephas()`` runs this file in that environment as a subprocess and returns its result.

What one run does (``--spec``: a RunSpec mapping; Spark ``local[2]``, 2 workers, one TensorFlow thread each):

- data: shard 0 and shard 1 of the run's two-worker shards, one RDD partition each (``to_simple_rdd`` per shard,
  joined with ``union``), so each Elephas worker trains on one shard, as our workers do. Pixels are float32 in
  [0, 1]; batch ``batch_size_per_worker`` on each worker; the workload's model, legacy Adam and loss.
  Elephas' ``num_workers`` is left unset: with it set, every ``fit()`` does ``rdd.repartition(num_workers)``, a
  full shuffle that would mix the shards; the two partitions give the same two workers.
- ``--mode synchronous``: Elephas averages the workers' weight changes (plain mean over partitions) once per
  ``fit()`` call, whatever ``--frequency`` says. The peer calls ``fit(epochs=1)`` once per epoch, so weights are
  averaged every epoch, like ``strategy=averaging`` with one round per epoch. Test accuracy is measured after each
  epoch only: evaluating more often would mean averaging more often, i.e. a different algorithm, so time-to-target
  has epoch granularity in this mode.
- ``--mode asynchronous``: Elephas' HTTP parameter server; workers pull the weights and push their change after
  every batch (``--frequency batch``) or epoch (``epoch``); the server adds each change as it comes (two workers
  that start an epoch from the same weights therefore apply the sum of their changes, not the mean). The peer
  calls ``fit(epochs=1)`` once per epoch with a fresh SparkModel, because Elephas' server process cannot be
  started twice; the only difference from one ``fit(epochs=N)`` is that the workers' Adam moments restart each
  epoch. While an epoch trains, a driver thread copies the server's weights (one GET of ~1 MB every half second,
  next to the workers' own per-batch GETs); ``evaluations_per_epoch - 1`` copies evenly spaced in time are
  evaluated after the epoch, off the clock, so time-to-target is not rounded to whole epochs here.
  In batch mode Elephas never reshuffles: each worker walks its shard in the same (already shuffled) order every
  epoch.

Clock and figures: an epoch's seconds are the wall time of its ``fit()`` call (Spark job, data shipped to the
Python workers, parameter-server start and stop included; test evaluations excluded). Starting Spark's two Python
workers and importing TensorFlow in them happens once before the first epoch, off the clock (reported as
``worker_start_seconds``), as a Keras training clock would start after it. samples/s = training
examples of both shards ÷ those seconds. ``bytes_moved`` counts parameter payloads from message counts (Spark
broadcast of the weights, the workers' results or their GET/POST of the weights; no protocol overhead, and not the
training data shipped to the workers).

Workarounds for Elephas 6.2.1: the parameter server is a forked Flask process that Elephas starts without waiting
for it to listen and stops with terminate(); the peer waits until it answers before the workers start, picks a
free port, turns off Flask's debug mode, makes the process a daemon and stops it in a ``finally``; a watchdog
(``--timeout-seconds``) ends the run if Elephas hangs; the SparkContext is always stopped.

The last line on stdout is one JSON object: mode, frequency, elephas_version, workers, epochs (epoch,
val_accuracy, epoch_seconds, samples_per_second, examples), evaluations (epoch as a fraction, val_accuracy,
training_seconds), time_to_target_seconds (null if not reached), final_accuracy, training_seconds,
worker_start_seconds, bytes_moved, wall_seconds.

Run it from the training environment (builds the environment if needed, then runs inside it)::

    .venv/training/bin/python bench/elephas_peer.py --spec '{"train_limit": 4000, ...}' --mode synchronous
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import venv
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_DIR = REPO_ROOT / "var" / "bench" / "elephas-venv"
REQUIREMENTS = Path(__file__).resolve().with_name("elephas-requirements.txt")
STAMP_NAME = ".cloudburst-stamp.json"
PTH_NAME = "_cloudburst_training_env.pth"
NO_DEPS_MARK = "# no-deps"
MODES = ("synchronous", "asynchronous")
FREQUENCIES = ("epoch", "batch")
WORKERS = 2
MASTER = f"local[{WORKERS}]"
SNAPSHOT_INTERVAL_SECONDS = 0.5
MAX_SNAPSHOTS = 64
EVALUATION_BATCH = 2000


class ElephasPeerError(RuntimeError):
    """The Elephas environment could not be built, or an Elephas run failed; the message says why."""


# The throwaway environment ------------------------------------------------------------------------------------
def venv_python(venv_dir: Path = VENV_DIR) -> Path:
    return venv_dir / "bin" / "python"


def ensure_environment(venv_dir: Path = VENV_DIR) -> Path:
    """Build ``venv_dir`` if missing or stale and return its Python; a second call costs one file read.

    The environment has no pip and no packages of its own beyond the pins in ``elephas-requirements.txt``: a
    ``.pth`` file adds the training environment's site-packages (this interpreter's, so call it from there), and
    the training environment's pip installs the pins into it.
    """
    training_site = Path(sysconfig.get_paths()["purelib"])
    stamp = {"requirements": REQUIREMENTS.read_text(), "training_site_packages": str(training_site),
             "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    python = venv_python(venv_dir)
    stamp_file = venv_dir / STAMP_NAME
    if python.exists() and stamp_file.exists() and _read_json(stamp_file) == stamp:
        return python
    for module in ("tensorflow", "pyspark", "pip", "training"):
        if not (training_site / module).exists() and not _importable(module):
            raise ElephasPeerError(f"call ensure_environment() from the training environment's Python: {module} is "
                                   f"not installed in {training_site} (this is {sys.executable})")
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(venv_dir.parent / f".{venv_dir.name}.lock"):
        if python.exists() and stamp_file.exists() and _read_json(stamp_file) == stamp:
            return python  # another process built it while this one waited
        shutil.rmtree(venv_dir, ignore_errors=True)
        venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(venv_dir)
        site_packages = Path(_venv_purelib(python))
        # addsitedir (not a bare path) so the training env's own .pth files (the editable `training`) also apply;
        # the venv's site-packages stays first on sys.path, so the pins installed here win.
        (site_packages / PTH_NAME).write_text(f"import site; site.addsitedir({str(training_site)!r})\n")
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet"]
        no_deps, with_deps = _requirements()
        if no_deps:
            _check_call([*pip, "--no-deps", *no_deps], "install Elephas")
        if with_deps:
            _check_call([*pip, *with_deps], "install Elephas' extra dependencies")
        _check_call([str(python), "-c", "import flask, h5py, pyspark, tensorflow, training, elephas.spark_model, "
                     "elephas.parameter.server"], "import Elephas in its environment")
        stamp_file.write_text(json.dumps(stamp, sort_keys=True))
    return python


def _requirements() -> tuple[list[str], list[str]]:
    """The pins, split into those installed without dependencies (marked ``# no-deps``) and the others."""
    no_deps, with_deps = [], []
    for line in REQUIREMENTS.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            (no_deps if NO_DEPS_MARK in line else with_deps).append(requirement)
    return no_deps, with_deps


def _venv_purelib(python: Path) -> str:
    return subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()


def _check_call(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise ElephasPeerError(
            f"could not {what} in {VENV_DIR} (exit {result.returncode}): {' '.join(command)}\n"
            f"{_tail(result.stdout + result.stderr)}\n"
            f"Pins: {REQUIREMENTS}. PyPI must be reachable for the first build; delete {VENV_DIR} to start over.")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    import fcntl

    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail(text: str, lines: int = 40) -> str:
    """The last lines of a process's output, without Java stack frames (Spark prints many on a stop)."""
    kept = [line for line in text.strip().splitlines() if not line.lstrip().startswith(("at ", "... "))]
    return "\n".join(kept[-lines:])


# Running a peer from the training environment -----------------------------------------------------------------
def peer_environment(python: Path) -> dict[str, str]:
    """The subprocess environment: the venv's Python for driver and workers, one TensorFlow thread per worker."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PYSPARK_GATEWAY", "PYSPARK_SUBMIT_ARGS"))}  # never attach to a caller's JVM
    env.update({"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python),
                "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                "SPARK_LOCAL_IP": "127.0.0.1",  # also where Elephas' workers look for its parameter server
                "PYTHONUNBUFFERED": "1"})
    return env


def run_elephas(spec_mapping: dict[str, Any], mode: str, frequency: str, timeout_seconds: float) -> dict[str, Any]:
    """Train with Elephas in its own environment and return the run's JSON result (see the module docstring).

    Relative paths in the spec (``data_root``) resolve against the current directory, as in the caller. Raises
    ElephasPeerError with the tail of the run's output if it fails or runs past ``timeout_seconds``.
    """
    if mode not in MODES or frequency not in FREQUENCIES:
        raise ElephasPeerError(f"mode must be one of {MODES} and frequency one of {FREQUENCIES}, "
                               f"got {mode!r}/{frequency!r}")
    python = ensure_environment()
    # The peer's own watchdog fires first and cleans up; the process-group kill below is the backstop.
    watchdog = max(10.0, timeout_seconds - 15.0)
    command = [str(python), str(Path(__file__).resolve()), "--spec", json.dumps(spec_mapping), "--mode", mode,
               "--frequency", frequency, "--timeout-seconds", f"{watchdog:.0f}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=peer_environment(python), start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        raise ElephasPeerError(f"Elephas {mode}/{frequency} ran past {timeout_seconds:.0f} s and was killed\n"
                               f"{_tail(stderr)}") from None
    finally:
        _kill_group(process)  # a parameter server or JVM left behind by a crash
    lines = [line for line in stdout.splitlines() if line.strip()]
    if process.returncode != 0 or not lines:
        raise ElephasPeerError(f"Elephas {mode}/{frequency} failed (exit {process.returncode})\n"
                               f"{_tail(stderr)}\n{_tail(stdout, 5)}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise ElephasPeerError(f"Elephas {mode}/{frequency}: no JSON result on the last line of its output\n"
                               f"{_tail(stdout, 10)}\n{_tail(stderr)}") from None


def _kill_group(process: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if sig == signal.SIGTERM:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


# The peer itself (runs inside the Elephas environment) --------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerSnapshots:
    """Copies the parameter server's weights in a driver thread while an asynchronous epoch trains."""

    def __init__(self, url: str, started: float) -> None:
        self.url, self.started = url, started
        self.snapshots: list[tuple[float, list[Any]]] = []  # (seconds into the epoch, weights)
        self.interval = SNAPSHOT_INTERVAL_SECONDS
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="elephas-snapshots", daemon=True)

    def __enter__(self) -> ServerSnapshots:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        import pickle
        import urllib.request

        while not self._stop.wait(self.interval):
            try:
                with urllib.request.urlopen(f"{self.url}/parameters", timeout=10) as response:
                    weights = pickle.loads(response.read())
            except OSError:
                continue  # not up yet, or already stopped
            self.snapshots.append((time.perf_counter() - self.started, weights))
            if len(self.snapshots) > MAX_SNAPSHOTS:  # bound memory on long epochs: keep every other, poll half as often
                self.snapshots = self.snapshots[1::2]
                self.interval *= 2

    def evenly_spaced(self, epoch_seconds: float, count: int) -> list[tuple[float, list[Any]]]:
        """For k = 1 … count, the copy taken closest to k/(count + 1) of the epoch (each copy at most once)."""
        chosen: set[int] = set()
        for k in range(1, count + 1):
            wanted = epoch_seconds * k / (count + 1)
            candidates = [index for index, (at, _) in enumerate(self.snapshots)
                          if at < epoch_seconds and index not in chosen]
            if candidates:
                chosen.add(min(candidates, key=lambda index: abs(self.snapshots[index][0] - wanted)))
        return [self.snapshots[index] for index in sorted(chosen)]


def _wait_until_listening(url: str, process: Any, seconds: float = 60.0) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process.is_alive():
            raise ElephasPeerError(f"Elephas' parameter server exited at start (exit code {process.exitcode})")
        try:
            with urllib.request.urlopen(f"{url}/", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise ElephasPeerError(f"Elephas' parameter server did not answer on {url} within {seconds:.0f} s")


def _start_watchdog(seconds: float, cleanup: list) -> None:
    def fire() -> None:
        print(f"elephas_peer: still running after {seconds:.0f} s, giving up (a hung Elephas server or worker)",
              file=sys.stderr, flush=True)
        for action in cleanup:
            with contextlib.suppress(Exception):
                action()
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def accuracy_of(model: Any, images: Any, labels: Any) -> float:
    import numpy as np

    correct = 0
    for start in range(0, len(images), EVALUATION_BATCH):
        logits = model(images[start : start + EVALUATION_BATCH], training=False)
        correct += int(np.sum(np.argmax(logits, axis=1) == labels[start : start + EVALUATION_BATCH]))
    return correct / len(labels)


def train_peer(spec_mapping: dict[str, Any], mode: str, frequency: str, timeout_seconds: float = 0) -> dict[str, Any]:
    """Train with Elephas in this process (the Elephas environment) and return the result mapping."""
    wall_started = time.perf_counter()
    cleanup: list = []
    if timeout_seconds:
        _start_watchdog(timeout_seconds, cleanup)

    from importlib.metadata import version

    import numpy as np
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    # The workers get one thread each from the environment; the driver only evaluates, off the clock: all cores.
    tf.config.threading.set_intra_op_parallelism_threads(os.cpu_count() or 1)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the forked Flask server would log every request
    from elephas.spark_model import SparkModel
    from elephas.utils.rdd_utils import to_simple_rdd
    from pyspark.sql import SparkSession

    from training.config import RunSpec
    from training.contract import VALIDATION_SPLIT
    from training.models.optimizers import make_optimizer
    from training.workload_registry import workload_for

    spec = RunSpec.from_mapping(spec_mapping).with_changes(nodes=1, workers_per_node=WORKERS).validate()
    workload = workload_for(spec)
    shards = [workload.load_shard(spec.shards_uri(), rank, WORKERS) for rank in range(WORKERS)]
    validation_images, validation_labels = workload.load_split(spec.augmented_uri(), VALIDATION_SPLIT)
    validation_images = validation_images.astype(np.float32) / 255.0
    examples = sum(len(labels) for _, labels in shards)

    tf.keras.utils.set_random_seed(spec.seed)
    model = workload.build_model()
    model.compile(optimizer=make_optimizer(spec.worker_optimizer, spec.learning_rate), loss=workload.make_loss(),
                  metrics=["accuracy"])
    weight_bytes = sum(tensor.nbytes for tensor in model.get_weights())

    spark = (SparkSession.builder.master(MASTER).appName(f"elephas-peer-{mode}-{frequency}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", os.environ.get("CLOUDBURST_SPARK_DRIVER_MEMORY", "4g"))
             .getOrCreate())
    cleanup.append(spark.stop)
    servers: list[Any] = []
    cleanup.insert(0, lambda: [_stop_server(server) for server in servers])
    try:
        context = spark.sparkContext
        context.setLogLevel("ERROR")
        # One partition per shard: Elephas' worker for partition r trains on shard r.
        rdd = context.union([to_simple_rdd(context, images.astype(np.float32) / 255.0, labels).coalesce(1)
                             for images, labels in shards])
        assert rdd.getNumPartitions() == WORKERS
        # Off the clock, as a Keras training clock would be: start both Python workers and import TensorFlow and
        # Elephas in them (Spark reuses these processes for the epochs' tasks).
        warm_up_started = time.perf_counter()
        context.parallelize(range(WORKERS), WORKERS).mapPartitions(
            lambda _: [__import__("elephas.worker").__name__]).collect()  # a closure: pickled by value
        warm_up_seconds = time.perf_counter() - warm_up_started
        fit_config = {"epochs": 1, "batch_size": spec.batch_size_per_worker, "verbose": 0, "validation_split": 0.0}
        batches = sum(-(-len(labels) // spec.batch_size_per_worker) for _, labels in shards)

        def new_spark_model() -> Any:
            if mode == "synchronous":
                return SparkModel(model, mode=mode, frequency=frequency)
            port = free_port()
            spark_model = SparkModel(model, mode=mode, frequency=frequency, parameter_server_mode="http", port=port)
            server = spark_model.parameter_server
            server.debug = False  # Elephas' default runs Flask in debug mode
            server.server.daemon = True  # never outlive the driver
            servers.append(server)
            url = f"http://127.0.0.1:{port}"

            def start_server() -> None:  # Elephas starts the server and lets workers connect at once: wait for it
                server.start()
                _wait_until_listening(url, server.server)

            spark_model.start_server = start_server
            spark_model.url = url
            return spark_model

        evaluation_model = tf.keras.models.clone_model(model)  # evaluates the server's copies
        epochs, evaluations = [], []
        clock, bytes_moved, time_to_target = 0.0, 0, None
        spark_model = new_spark_model()
        for epoch in range(1, spec.epochs + 1):
            if mode == "asynchronous" and epoch > 1:
                spark_model = new_spark_model()  # a stopped Elephas server cannot start again
            started = time.perf_counter()
            if mode == "asynchronous":
                with ServerSnapshots(spark_model.url, started) as snapshots:
                    spark_model.fit(rdd, **fit_config)
            else:
                spark_model.fit(rdd, **fit_config)
            seconds = time.perf_counter() - started
            if mode == "synchronous":
                bytes_moved += 2 * weight_bytes * WORKERS  # broadcast down, weight changes up
            else:
                exchanges = batches if frequency == "batch" else WORKERS  # one GET + one POST each
                bytes_moved += weight_bytes * WORKERS + 2 * weight_bytes * exchanges  # initial broadcast + exchanges
            # Off the clock: evaluate copies taken during the epoch, then the driver's model at its end.
            points = []
            if mode == "asynchronous":
                for at, weights in snapshots.evenly_spaced(seconds, spec.evaluations_per_epoch - 1):
                    evaluation_model.set_weights(weights)
                    points.append((at, accuracy_of(evaluation_model, validation_images, validation_labels)))
            accuracy = accuracy_of(model, validation_images, validation_labels)
            points.append((seconds, accuracy))
            for at, point_accuracy in points:
                evaluations.append({"epoch": round(epoch - 1 + at / seconds, 4), "val_accuracy": point_accuracy,
                                    "training_seconds": clock + at})
                if time_to_target is None and point_accuracy >= spec.target_accuracy:
                    time_to_target = clock + at
            clock += seconds
            epochs.append({"epoch": epoch, "val_accuracy": accuracy, "epoch_seconds": seconds,
                           "samples_per_second": examples / seconds, "examples": examples})
            print(f"elephas {mode}/{frequency} epoch {epoch}: {examples / seconds:,.0f} samples/s, "
                  f"validation accuracy {accuracy:.4f}, {seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        for action in cleanup:
            with contextlib.suppress(Exception):
                action()
    return {"mode": mode, "frequency": frequency, "elephas_version": version("elephas"), "workers": WORKERS,
            "parameter_server": "http" if mode == "asynchronous" else None, "epochs": epochs,
            "evaluations": evaluations, "time_to_target_seconds": time_to_target,
            "target_accuracy": spec.target_accuracy, "final_accuracy": epochs[-1]["val_accuracy"],
            "training_seconds": clock, "worker_start_seconds": warm_up_seconds, "bytes_moved": bytes_moved,
            "wall_seconds": time.perf_counter() - wall_started}


def _stop_server(server: Any) -> None:
    process = server.server
    with contextlib.suppress(ValueError):  # ValueError: Elephas already closed it
        if process.is_alive():
            process.terminate()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def in_peer_environment() -> bool:
    return Path(sys.prefix).resolve() == VENV_DIR.resolve()


def _spec_object(text: str) -> dict[str, Any]:
    """--spec: a JSON object read strictly (no key twice, bounded in size and depth), one line when refused."""
    from training.strict_json import JsonError, loads_object

    try:
        return loads_object(text, "the JSON mapping")
    except JsonError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default={}, type=_spec_object,
                        help="the run specification as a JSON mapping of RunSpec fields (default: all defaults); "
                             "nodes × workers_per_node is forced to 1 × 2, the data must be prepared already")
    parser.add_argument("--mode", choices=MODES, default="synchronous",
                        help="Elephas mode: synchronous = weights averaged after every epoch; asynchronous = HTTP "
                             "parameter server (default: synchronous)")
    parser.add_argument("--frequency", choices=FREQUENCIES, default="epoch",
                        help="asynchronous only: workers exchange weights with the server every epoch or every "
                             "batch (default: epoch)")
    parser.add_argument("--timeout-seconds", type=float, default=1800,
                        help="give up (stopping Spark and the parameter server) after this long; 0 = never "
                             "(default: 1800)")
    parser.add_argument("--ensure-environment", action="store_true",
                        help="only build var/bench/elephas-venv if needed and print its Python")
    args = parser.parse_args(argv)
    if args.ensure_environment:
        print(ensure_environment())
        return
    spec_mapping = args.spec
    if in_peer_environment():  # also when started directly with the venv's Python: Spark's workers must use it too
        environment = peer_environment(Path(sys.executable))
        os.environ.update({name: environment[name] for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")})
        for name, value in environment.items():
            os.environ.setdefault(name, value)
    else:  # started from the training environment: build the venv, rerun inside it
        try:
            result = run_elephas(spec_mapping, args.mode, args.frequency, args.timeout_seconds or 24 * 3600)
        except ElephasPeerError as error:
            sys.exit(f"elephas_peer: {error}")
        print(json.dumps(result))
        return
    result = train_peer(spec_mapping, args.mode, args.frequency, args.timeout_seconds)
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)  # nothing left to wait for; TensorFlow and py4j threads sometimes delay a normal exit


if __name__ == "__main__":
    main()
