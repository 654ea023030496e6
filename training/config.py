"""The run specification: one typed object that travels unchanged from DAG Params to spark-submit arguments,
to the strategy, to MLflow params. Field names are the shared names every workload and strategy logs.

Standard library only: the Airflow environment imports this module to validate a run before any Spark job.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from training import REPO_ROOT, dataset_names
from training import VENDORED_MNIST as VENDORED_MNIST_PATH

STRATEGIES = ("horovod", "downpour", "averaging")
SERVER_OPTIMIZERS = ("adagrad", "sgd")
WORKLOADS = ("mnist_elastic_cnn", "kws_densenet_bilstm")
SPEECH_WORKLOADS = ("kws_densenet_bilstm",)
KWS_TASKS = (12, 35)
FEATURE_KINDS = ("log_mel", "mfcc")  # training.audio.features computes them; repeated here to stay stdlib-only
SYNTHETIC_SOURCE = "synthetic"
VENDORED_MNIST = str(VENDORED_MNIST_PATH)


FIELD_DOCS: dict[str, tuple[str, str]] = {  # field → (title, description): CLI help and DAG Params
    "workload": ("Workload", "What to train; each DAG fixes its own."),
    "data_source": (
        "Data source",
        "MNIST: a directory holding the four IDX files (.gz or raw) with an optional SHA256SUMS, or an http(s)"
        " base URL; empty: the copy vendored in the repository (offline). Keyword spotting: 'synthetic' (a"
        " corpus synthesised offline, the default), or a Speech Commands directory, .tar.gz or http(s) URL.",
    ),
    "data_sha256": (
        "Source sha256 (optional)",
        "Keyword spotting: the expected sha256 of a .tar.gz source (path or URL); ingestion refuses anything"
        " else.",
    ),
    "speakers": (
        "Synthetic speakers",
        "Keyword spotting with data_source 'synthetic': how many voices to synthesise; Speech Commands' sha1"
        " rule puts about 10 % of them in the test split, unseen in training.",
    ),
    "kws_task": (
        "Keyword task",
        "12: the standard ten keywords plus _silence_ and _unknown_ (sampled from the other words); 35: every"
        " word directory is a class (35 in v0.02, 30 in v0.01).",
    ),
    "features": (
        "Audio features",
        "log_mel: 40 log-mel bands (25 ms window, 10 ms hop); mfcc: 40 MFCCs of the same bands.",
    ),
    "resample": (
        "Resample other rates",
        "Keyword spotting: resample clips recorded at a rate other than 16 kHz (instead of skipping them and"
        " listing them in the ingest report).",
    ),
    "train_limit": (
        "Training images (0 = all)",
        "Keep only the first N training images: quick runs and tests. 0 uses all 60,000.",
    ),
    "test_limit": (
        "Test images (0 = all)",
        "Keep only the first N test images.",
    ),
    "augment_copies": (
        "Augmentation copies k",
        "Augmented copies per training example, originals kept; the test split is never augmented. MNIST:"
        " elastic deformations; keyword spotting: random time shift (±100 ms) and background noise at a"
        " random SNR.",
    ),
    "alpha": (
        "α (displacement scale, pixels)",
        "Scale of the smoothed random displacement field (Simard et al. 2003 use 34).",
    ),
    "sigma": (
        "σ (smoothing, pixels)",
        "Standard deviation of the Gaussian that smooths the displacement field (Simard et al.: 4).",
    ),
    "nodes": (
        "Nodes",
        "Machines taking part. In local mode a node is simulated by a group of Spark task slots.",
    ),
    "workers_per_node": (
        "Workers per node",
        "Training processes on each node; total workers = nodes × workers per node, and the data is cut into "
        "that many shards. Each worker gets the node's cores ÷ workers per node TensorFlow threads.",
    ),
    "strategy": (
        "Strategy",
        "How workers combine their work. horovod: synchronous ring all-reduce of gradients every step "
        "(Horovod on Spark, Gloo). downpour: asynchronous Downpour SGD, workers fetch from and push to a "
        "sharded parameter server in the Spark driver and never wait for each other. averaging: MapReduce "
        "model averaging, evaluations_per_epoch rounds per epoch of local training, weights averaged by "
        "examples seen.",
    ),
    "epochs": (
        "Epochs",
        "Passes over the (augmented) training set.",
    ),
    "batch_size_per_worker": (
        "Batch size per worker",
        "Examples per step on each worker; the global batch is this × total workers. Larger batches talk less"
        " often and scale better.",
    ),
    "learning_rate": (
        "Learning rate (one worker)",
        "Adam's learning rate for one worker (horovod, averaging); Horovod scales it by the number of workers "
        "after a warm-up. Downpour uses server_learning_rate instead.",
    ),
    "warmup_epochs": (
        "Warm-up epochs",
        "Epochs over which the learning rate ramps from the one-worker value to the scaled one.",
    ),
    "seed": (
        "Seed",
        "Seeds augmentation, sharding and weight initialisation.",
    ),
    "target_accuracy": (
        "Target accuracy",
        "Time-to-target is the training time until the test accuracy first reaches this.",
    ),
    "evaluations_per_epoch": (
        "Evaluations per epoch",
        "How often test accuracy is measured during training (for time-to-target).",
    ),
    "fp16_compression": (
        "fp16 gradient compression",
        "Send gradients as float16: half the bytes on the wire.",
    ),
    "backward_passes_per_step": (
        "Backward passes per step",
        "Accumulate gradients locally over this many batches before each all-reduce.",
    ),
    "n_fetch": (
        "Downpour: fetch every n steps",
        "A worker fetches fresh parameters from the server every n_fetch of its steps (Dean et al.'s n_fetch).",
    ),
    "n_push": (
        "Downpour: push every n steps",
        "A worker pushes the gradients it accumulated every n_push of its steps, taking local steps in "
        "between; larger values talk less and scale better (Dean et al.'s n_push).",
    ),
    "ps_shards": (
        "Downpour: parameter-server shards",
        "The parameters are split into this many slices, each served and updated on its own.",
    ),
    "server_optimizer": (
        "Downpour: server optimizer",
        "How the server applies a pushed gradient: adagrad (per-parameter step sizes, as in Downpour SGD) or "
        "plain sgd.",
    ),
    "server_learning_rate": (
        "Downpour: server learning rate",
        "Step size of the server's optimizer, also used for the workers' local steps between pushes.",
    ),
    "warm_start_steps": (
        "Downpour: warm-start steps",
        "Worker 0 trains alone for this many steps before the others join (the paper's remedy for early "
        "instability); 0 starts everyone at once.",
    ),
    "threads_per_worker": (
        "Threads per worker (0 = automatic)",
        "TensorFlow intra-op threads per worker; 0 means the node's cores ÷ workers per node.",
    ),
    "existing_shards": (
        "Existing shards (optional)",
        "URI of shards made earlier to train on instead of sharding for this run; needs at least one shard "
        "per worker.",
    ),
    "data_root": (
        "Data root (optional)",
        "Where datasets and runs live: a path, file:// or hdfs:// URI. Empty: $CLOUDBURST_DATA_ROOT or "
        "./var/datasets.",
    ),
    "tracking_uri": (
        "MLflow tracking URI (optional)",
        "Empty: $MLFLOW_TRACKING_URI or SQLite under ./var/mlflow.",
    ),
    "run_name": (
        "Run name (optional)",
        "Names the run's directory (checkpoints, model). Empty: derived from the DAG run id, so a retried "
        "task resumes the same run.",
    ),
}


class RunSpecError(ValueError):
    """A run specification value is invalid; the message names the value and says why."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines a training run. Every field is a DAG Param, a CLI flag and an MLflow param."""

    workload: str = "mnist_elastic_cnn"
    strategy: str = "horovod"
    nodes: int = 1
    workers_per_node: int = 2
    epochs: int = 5
    batch_size_per_worker: int = 128
    learning_rate: float = 0.001
    warmup_epochs: int = 1
    augment_copies: int = 1
    alpha: float = 34.0
    sigma: float = 4.0
    seed: int = 0
    data_source: str = ""
    data_sha256: str = ""
    speakers: int = 100
    kws_task: int = 12
    features: str = "log_mel"
    resample: bool = False
    train_limit: int = 0
    test_limit: int = 0
    target_accuracy: float = 0.99
    evaluations_per_epoch: int = 4
    threads_per_worker: int = 0
    fp16_compression: bool = False
    backward_passes_per_step: int = 1
    n_fetch: int = 4
    n_push: int = 4
    ps_shards: int = 2
    server_optimizer: str = "adagrad"
    server_learning_rate: float = 0.1
    warm_start_steps: int = 0
    existing_shards: str = ""
    data_root: str = ""
    tracking_uri: str = ""
    run_name: str = "manual"

    @property
    def total_workers(self) -> int:
        return self.nodes * self.workers_per_node

    @property
    def config(self) -> str:
        """The configuration tag, nodes × workers_per_node, e.g. ``2x1``."""
        return f"{self.nodes}x{self.workers_per_node}"

    # Locations -----------------------------------------------------------------------------------------------
    def resolved_data_root(self) -> str:
        from training import storage

        return storage.to_uri(self.data_root) if self.data_root else storage.data_root()

    @property
    def is_speech(self) -> bool:
        return self.workload in SPEECH_WORKLOADS

    def resolved_data_source(self) -> str:
        """The data source, or the workload's offline default: the vendored MNIST, or a synthetic corpus."""
        if self.data_source:
            return self.data_source
        return SYNTHETIC_SOURCE if self.is_speech else VENDORED_MNIST

    def raw_uri(self) -> str:
        """The ingested data: MNIST images, or Speech Commands clips labelled for the keyword task."""
        if self.is_speech:
            return dataset_names.speech_clips(self.resolved_data_root(), self.source_id(), self.kws_task,
                                              self.resample)
        return dataset_names.raw_mnist(self.resolved_data_root(), self.train_limit, self.test_limit)

    def augmented_uri(self) -> str:
        """What training reads: elastic MNIST, or keyword-spotting features with their augmented copies."""
        if self.is_speech:
            return dataset_names.speech_features(self.raw_uri(), self.features, self.augment_copies, self.seed)
        return dataset_names.elastic(self.raw_uri(), self.augment_copies, self.alpha, self.sigma, self.seed)

    def source_id(self) -> str:
        """A short name for a speech source: the synthetic corpus' recipe, or a hash of the path or URL."""
        source = self.resolved_data_source()
        if source == SYNTHETIC_SOURCE:
            return f"synthetic-s{self.speakers}-seed{self.seed}"
        return "source-" + hashlib.sha1(source.encode()).hexdigest()[:10]

    def shards_uri(self) -> str:
        """The shards to train on: one per worker by default, or existing ones (at least one per worker)."""
        if self.existing_shards:
            return self.existing_shards
        return dataset_names.shards(self.augmented_uri(), self.total_workers, self.seed)

    def run_uri(self) -> str:
        """Where the run keeps checkpoints, the final model and its result; stable across task retries."""
        return f"{self.resolved_data_root()}/runs/{self.workload}/{self.run_name}"

    def resolved_tracking_uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'var' / 'mlflow' / 'mlflow.db'}"

    # Validation ----------------------------------------------------------------------------------------------
    def validate(self) -> RunSpec:
        """Check every value; raise RunSpecError naming the first bad one."""
        _require(self.workload in WORKLOADS, "workload", self.workload, f"must be one of {', '.join(WORKLOADS)}")
        _require(self.strategy in STRATEGIES, "strategy", self.strategy, f"must be one of {', '.join(STRATEGIES)}")
        for name in ("nodes", "workers_per_node", "epochs", "batch_size_per_worker", "evaluations_per_epoch",
                     "backward_passes_per_step", "n_fetch", "n_push", "ps_shards"):
            _require(getattr(self, name) >= 1, name, getattr(self, name), "must be ≥ 1")
        for name in ("augment_copies", "seed", "train_limit", "test_limit", "threads_per_worker", "warmup_epochs",
                     "warm_start_steps"):
            _require(getattr(self, name) >= 0, name, getattr(self, name), "must be ≥ 0")
        _require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")
        _require(self.server_learning_rate > 0, "server_learning_rate", self.server_learning_rate, "must be > 0")
        _require(self.server_optimizer in SERVER_OPTIMIZERS, "server_optimizer", self.server_optimizer,
                 f"must be one of {', '.join(SERVER_OPTIMIZERS)}")
        _require(self.kws_task in KWS_TASKS, "kws_task", self.kws_task,
                 f"must be one of {', '.join(map(str, KWS_TASKS))}")
        _require(self.features in FEATURE_KINDS, "features", self.features,
                 f"must be one of {', '.join(FEATURE_KINDS)}")
        _require(self.speakers >= 1, "speakers", self.speakers, "must be ≥ 1")
        _require(self.data_sha256 == "" or re.fullmatch(r"[0-9a-fA-F]{64}", self.data_sha256) is not None,
                 "data_sha256", self.data_sha256, "must be 64 hexadecimal digits (or empty)")
        _require(self.alpha >= 0, "alpha", self.alpha, "must be ≥ 0")
        _require(self.sigma > 0, "sigma", self.sigma, "must be > 0")
        _require(0 < self.target_accuracy <= 1, "target_accuracy", self.target_accuracy, "must be in (0, 1]")
        _require(re.fullmatch(r"[A-Za-z0-9_.-]+", self.run_name) is not None, "run_name", self.run_name,
                 "may hold only letters, digits and _ . - (it names a directory, also on HDFS)")
        if self.train_limit:
            _require(self.train_limit >= self.total_workers, "train_limit", self.train_limit,
                     f"must give every one of the {self.total_workers} workers at least one example")
        return self

    def validate_sources(self) -> RunSpec:
        """Check that the data source exists (a local directory, or an http(s) URL that ingestion downloads)."""
        source = self.resolved_data_source()
        if source.startswith(("http://", "https://")):
            return self
        if self.is_speech:
            if source != SYNTHETIC_SOURCE and not Path(source).is_dir() and not _is_archive(source):
                raise RunSpecError(f"data_source={source!r}: not 'synthetic', a directory, an existing .tar.gz "
                                   "or an http(s) URL")
        elif not Path(source).is_dir():
            raise RunSpecError(f"data_source={source!r}: no such directory (give a directory or an http(s) URL)")
        return self

    def validate_shards(self, num_shards: int) -> None:
        """Every worker needs a shard of its own; with more shards than workers, a worker takes several."""
        if self.total_workers > num_shards:
            raise RunSpecError(
                f"nodes × workers_per_node = {self.total_workers} workers but the dataset has {num_shards} shards"
            )

    # Transport -----------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> RunSpec:
        """Build from DAG Params or parsed JSON; unknown names and wrong types are errors."""
        known = {field.name: field for field in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise RunSpecError(f"unknown run setting(s): {', '.join(unknown)}")
        converted = {name: _convert(name, known[name].type, value) for name, value in values.items()}
        return cls(**converted)

    def with_changes(self, **changes: Any) -> RunSpec:
        return dataclasses.replace(self, **changes)

    def to_mapping(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_mapping(), sort_keys=True)

    def to_args(self) -> list[str]:
        """Command-line flags (``--workers-per-node 2`` …) that :meth:`from_args` reads back."""
        args: list[str] = []
        for field in fields(self):
            value = getattr(self, field.name)
            if value != "":  # an empty text setting is its default; leaving it out keeps shell-split lines intact
                args += [f"--{field.name.replace('_', '-')}", _format(value)]
        return args

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        defaults = cls()
        for field in fields(cls):
            description = FIELD_DOCS.get(field.name, ("", ""))[1]
            default = _format(getattr(defaults, field.name)) or "automatic"
            parser.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, default=None,
                                help=f"{description} (default: {default})".replace("%", "%%"))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunSpec:
        given = {field.name: getattr(args, field.name) for field in fields(cls)}
        return cls.from_mapping({name: value for name, value in given.items() if value is not None})

    def mlflow_params(self) -> dict[str, str]:
        """Every field plus the derived ``total_workers``; MLflow params are strings."""
        params = {name: _format(value) for name, value in self.to_mapping().items()}
        params["total_workers"] = str(self.total_workers)
        return params


def _is_archive(source: str) -> bool:
    return Path(source).is_file() and source.endswith((".tar.gz", ".tgz", ".tar"))


def _require(condition: bool, name: str, value: Any, why: str) -> None:
    if not condition:
        raise RunSpecError(f"{name}={value!r}: {why}")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _convert(name: str, type_name: Any, value: Any) -> Any:
    type_name = type_name if isinstance(type_name, str) else type_name.__name__
    try:
        if type_name == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if type_name == "int":
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if type_name == "float":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        return "" if value is None else str(value)
    except (TypeError, ValueError):
        raise RunSpecError(f"{name}={value!r}: expected {type_name}") from None


def run_name_from(identifier: str) -> str:
    """A valid run name from any identifier (e.g. an Airflow run id): other characters become '-'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", identifier).strip("-") or "run"
