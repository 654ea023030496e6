"""The one table of run settings. Each setting is declared once — name, type, default, bounds, title, help,
form section — and everything else is derived from it: the RunSpec field (training.config), its validation, the
CLI flag of every job, the spark-submit arguments, the DAG Param and its trigger-form widget, the MLflow param.

Settings every workload shares are declared here; a workload declares its own in its package
(training/workloads/<name>/) and may change a shared setting's default there. Standard library only: the Airflow
environment imports it.
"""

from __future__ import annotations

import math
import re
import reprlib
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

from training.contract import HOROVOD as HOROVOD_STRATEGY
from training.contract import STRATEGIES

# Trigger-form sections, in the order the form shows them.
DATA = "Data"
AUGMENTATION = "Augmentation"
CLUSTER = "Cluster shape"
TRAINING = "Training"
HOROVOD = "Horovod communication"
DOWNPOUR = "Downpour parameter server"
ADVANCED = "Advanced"
SECTIONS = (DATA, AUGMENTATION, CLUSTER, TRAINING, HOROVOD, DOWNPOUR, ADVANCED)

DEFAULT_WORKLOAD = "mnist_elastic_cnn"  # what a run or a study trains when none is named
OPTIMIZERS = ("adagrad", "sgd", "momentum", "adam")
LEARNING_RATE_DECAYS = ("none", "cosine")
PRECISIONS = ("float32", "mixed_bfloat16")  # Keras dtype policies
# A run name is a directory on every file system and HDFS: a letter or digit first, so never ".", "..", a hidden
# name (staging copies are ".<name>.tmp-…") or a flag ("-x").
RUN_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
RUN_NAME_HELP = "may hold only letters, digits and _ . -, a letter or digit first (it names a directory)"
# The longest names made from a run name stay within every limit with room to spare: the MLflow run
# "system-averaging-64x64-<run name>" (23 + 100) within MLflow's 250, the staging directory
# ".<run name>.tmp-12345678-retired" (22 + 100) within the 255 bytes of a file name on ext4 and HDFS.
RUN_NAME_MAX_LENGTH = 100
# Any other text setting: it travels as a command-line argument and an MLflow param (at most 6,000 characters).
MAX_TEXT_LENGTH = 1000
# 1 to 65535.
PORT_PATTERN = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
# A link rate the namespace cluster's tc can shape to, 1mbit to 100gbit (infra/cluster/netns.sh check_link).
LINK_RATE_PATTERN = r"[1-9][0-9]{0,4}mbit|([1-9][0-9]?|100)gbit"
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}
_JSON_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null",
               list: "a list", dict: "an object"}
# Where datasets and runs live (training.storage): a path, file:// or hdfs://.
DATASET_SCHEMES = ("", "file", "hdfs")
# What MLflow's tracking_uri takes here: SQLite, an MLflow server, a database server. Not a path or file:// — MLflow
# 3 refuses its file store (maintenance mode) with a traceback at the first run, so it is refused here, in one line.
TRACKING_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql")
# Schemes whose URIs must name a host: a NameNode, a web server.
HOST_SCHEMES = ("hdfs", "http", "https")
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|[0-9A-Fa-f:.]+")  # a name, an IPv4 or IPv6 address
SHOWN_CHARACTERS = 60
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxstring, _SHORT_REPR.maxother = 2, SHOWN_CHARACTERS, SHOWN_CHARACTERS


class RunSpecError(ValueError):
    """A run setting is invalid; the message names the setting and says why."""


class RunSettings(Protocol):
    """A run's settings as attributes — what ``training.config.RunSpec`` is. The modules below the run
    specification (workload definitions, strategy rules) name the run they describe by this, not by importing
    ``RunSpec``: it is built from their settings, so they sit under it."""

    workload: str
    strategy: str

    def __getattr__(self, name: str) -> Any: ...


def shown(value: Any) -> str:
    """A value as an error message quotes it: its repr, a long one cut to a short prefix that says how long it was
    (a 10 MB value must not become a 10 MB log line), a deep one cut at its second level."""
    if isinstance(value, str) and len(value) > SHOWN_CHARACTERS:
        return f"{value[:SHOWN_CHARACTERS]!r}… ({len(value):,} characters)"
    try:
        return _SHORT_REPR.repr(value)
    except ValueError:  # an integer too long for Python to print
        return f"<an integer of {value.bit_length():,} bits>"


def shown_names(names: list[str], most: int = 5) -> str:
    """Names for an error message (unknown settings, say): the first few, each cut short, and how many more."""
    listed = ", ".join(name if len(name) <= SHOWN_CHARACTERS else shown(name) for name in names[:most])
    return listed + (f" and {len(names) - most:,} more" if len(names) > most else "")


def uri_problem(value: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``value`` is not a URI with one of ``schemes`` ("" stands for a plain path), or None when it is one:
    the scheme, the host the scheme needs, the port's range, all checked before anything connects."""
    if any(character.isspace() or not character.isprintable() for character in value):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an IPv6 host without its closing bracket
        return "is not a valid URI"
    scheme = parts.scheme.lower().partition("+")[0]  # postgresql+psycopg2: a driver for the scheme
    if scheme not in schemes:
        return f"{parts.scheme + '://' if parts.scheme else 'a plain path'} is not allowed: use " + ", ".join(
            f"{name}://" if name else "a path" for name in schemes)
    return _location_problem(parts, scheme) if scheme else None


def _location_problem(parts: SplitResult, scheme: str) -> str | None:
    """Why a URI's host, port or path cannot be what its scheme needs, or None."""
    try:
        port = parts.port
    except ValueError:  # not a number, or above 65535
        port = 0
    if port == 0 or parts.netloc.endswith(":"):
        return "its port must be a number from 1 to 65535"
    if scheme in HOST_SCHEMES and not parts.hostname:
        example = "namenode:8020/path" if scheme == "hdfs" else "server:5000"
        return f"needs a host, e.g. {scheme}://{example}"
    if parts.hostname and _HOST.fullmatch(parts.hostname) is None:
        return f"the host {shown(parts.hostname)} is not a host name or an IP address"
    if scheme == "file" and parts.hostname not in (None, "localhost"):
        return "a file:// URI names a file of this machine: file:///path"
    if scheme in ("file", "sqlite") and not parts.path:
        return f"needs a path, e.g. {scheme}:///path"
    if parts.scheme.lower() == "postgresql":  # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3's
        return "needs its driver: postgresql+psycopg2://user@host:port/database (the driver installed here)"
    return None


@dataclass(frozen=True)
class Setting:
    """One run setting. ``minimum``/``maximum`` bound numbers; ``choices`` or ``pattern`` restrict values."""

    name: str
    type: type
    default: Any
    title: str
    description: str
    section: str = ADVANCED
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False  # the minimum itself is not allowed (e.g. a learning rate > 0)
    choices: tuple[Any, ...] | None = None
    pattern: str | None = None  # a string setting must match it in full (an empty optional one is exempt)
    pattern_help: str = ""  # what the pattern means, for the error message
    max_length: int | None = None  # a string setting's longest value (default MAX_TEXT_LENGTH)
    uri_schemes: tuple[str, ...] = ()  # a string setting that is a URI: its allowed schemes ("" = a plain path)
    optional: bool = False  # a string setting that may be empty: the empty value means "automatic"
    on_form: bool = True  # the workload setting is fixed by each DAG, so it is not on the form
    internal: bool = False  # set by the pipeline itself, never by a person: accepted but left out of --help
    # Read from the train step on (the strategy, the model, …), never by the data steps before it: their --help
    # leaves it out (they accept it like every setting).
    training_only: bool = False
    metavar: str = ""  # the value's name in --help (default: from its type, choices or URI schemes)
    empty_means: str = ""  # what an empty value of an optional setting does, for --help and the reference

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def text_limit(self) -> int:
        """The longest value a string setting takes."""
        return self.max_length or MAX_TEXT_LENGTH

    # Values ---------------------------------------------------------------------------------------------------
    def convert(self, value: Any) -> Any:
        """A value from a form, JSON or the command line → this setting's type; RunSpecError when impossible."""
        try:
            if self.type is bool:
                if isinstance(value, bool):
                    return value
                if str(value).lower() in ("true", "1", "yes"):
                    return True
                if str(value).lower() in ("false", "0", "no"):
                    return False
                raise ValueError
            if self.type is int:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise ValueError
                return int(float(value))
            if self.type is float:
                if isinstance(value, bool):
                    raise ValueError
                return float(value)
            return "" if value is None else str(value)
        except (TypeError, ValueError, OverflowError):
            raise RunSpecError(f"{self.name}={shown(value)}: expected {self.type.__name__}") from None

    def from_json(self, value: Any) -> Any:
        """A value parsed from JSON → this setting's type, refusing another JSON type: JSON says what a value is,
        so the text "3" is no integer (``convert`` turns command-line text into values)."""
        if self.type is str and value is None and self.optional:
            return ""  # the trigger form sends an empty optional text field as null
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if type(value) is not self.type:
            found = _JSON_NAMES.get(type(value), type(value).__name__)
            raise RunSpecError(f"{self.name}={shown(value)}: expected {_JSON_NAMES[self.type]} in JSON, not {found}")
        return value

    def check(self, value: Any) -> None:
        """Raise RunSpecError naming this setting when ``value`` is outside its bounds."""
        if self.choices is not None and value not in self.choices:
            self._reject(value, f"must be one of {', '.join(map(str, self.choices))}")
        if self.type is float and not math.isfinite(value):
            self._reject(value, "must be a finite number")
        if self.minimum is not None:
            if self.exclusive_minimum and not value > self.minimum:
                self._reject(value, f"must be > {self.minimum:g}")
            if not self.exclusive_minimum and not value >= self.minimum:
                self._reject(value, f"must be ≥ {self.minimum:g}")
        if self.maximum is not None and not value <= self.maximum:
            self._reject(value, f"must be ≤ {self.maximum:g}")
        if self.type is str:
            self._check_text(value)

    def _check_text(self, value: str) -> None:
        if value == "" and not self.optional:
            self._reject(value, "must not be empty")
        if len(value) > self.text_limit:
            self._reject(value, f"must be at most {self.text_limit} characters")
        if value and self.pattern and re.fullmatch(self.pattern, value) is None:
            self._reject(value, self.pattern_hint())
        problem = uri_problem(value, self.uri_schemes) if value and self.uri_schemes else None
        if problem:
            self._reject(value, problem)

    def pattern_hint(self) -> str:
        return self.pattern_help or f"must match {self.pattern}"

    def _reject(self, value: Any, why: str) -> None:
        raise RunSpecError(f"{self.name}={shown(value)}: {why}")

    def format(self, value: Any) -> str:
        """The text form of a value: command-line arguments and MLflow params."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    # The trigger form -----------------------------------------------------------------------------------------
    def json_schema(self, default: Any) -> dict[str, Any]:
        """Keyword arguments for an Airflow ``Param``: JSON type and bounds, so the form checks them too."""
        json_type: Any = _JSON_TYPES[self.type]
        if self.type is str and self.optional:
            json_type = ["null", "string"]  # the form sends an empty optional text field as null
        schema: dict[str, Any] = {"type": json_type, "title": self.title, "description": self.description,
                                  "section": self.section}
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.type is str:
            schema["maxLength"] = self.text_limit
        if self.pattern:  # grouped: a top-level | must not escape the anchors; an optional one may be empty
            schema["pattern"] = f"^(?:{self.pattern})?$" if self.optional else f"^(?:{self.pattern})$"
        return schema


def _positive(name: str, type_: type, default: Any, title: str, description: str, section: str,
              maximum: float | None = None, training_only: bool = False) -> Setting:
    return Setting(name, type_, default, title, description, section, minimum=1, maximum=maximum,
                   training_only=training_only)


SHARED_SETTINGS: tuple[Setting, ...] = (
    Setting("workload", str, DEFAULT_WORKLOAD, "Workload", "What to train; each DAG fixes its own.",
            max_length=64, on_form=False),
    Setting("data_source", str, "", "Data source",
            "Where the raw data comes from; empty: the workload's offline default (the vendored MNIST, a "
            "synthetic speech corpus). See each workload's form for what it accepts.", DATA, optional=True,
            uri_schemes=("", "hdfs", "http", "https"), empty_means="the workload's offline default"),
    Setting("augment_copies", int, 1, "Augmentation copies k",
            "Augmented copies per training example, originals kept; evaluation data is never augmented. MNIST: "
            "elastic deformations; keyword spotting: random time shift (±100 ms) and background noise at a random "
            "SNR.", AUGMENTATION, minimum=0, maximum=50),
    _positive("nodes", int, 1, "Nodes",
              "Machines taking part. In local mode a node is simulated by a group of Spark task slots.", CLUSTER,
              maximum=64),
    _positive("workers_per_node", int, 2, "Workers per node",
              "Training processes on each node; total workers = nodes × workers per node, and the data is cut "
              "into that many shards. Each worker gets the node's cores ÷ workers per node TensorFlow threads.",
              CLUSTER, maximum=64),
    Setting("strategy", str, HOROVOD_STRATEGY, "Strategy",
            "How workers combine their work. horovod: synchronous ring all-reduce of gradients every step "
            "(Horovod on Spark, Gloo). downpour: asynchronous Downpour SGD, workers fetch from and push to a "
            "sharded parameter server in the Spark driver and never wait for each other. averaging: MapReduce "
            "model averaging, rounds_per_epoch rounds per epoch of local training, weights averaged by examples "
            "seen.", TRAINING, choices=STRATEGIES, training_only=True),
    _positive("epochs", int, 5, "Epochs", "Passes over the (augmented) training set.", TRAINING, maximum=10_000,
              training_only=True),
    _positive("batch_size_per_worker", int, 128, "Batch size per worker",
              "Examples per step on each worker; the global batch is this × total workers. Larger batches talk "
              "less often and scale better.", TRAINING, maximum=65_536, training_only=True),
    Setting("learning_rate", float, 0.001, "Learning rate (one worker)",
            "The worker optimizer's learning rate for one worker (horovod, averaging); Horovod scales it by the "
            "number of workers after a warm-up. Downpour uses server_learning_rate instead.", TRAINING, minimum=0,
            exclusive_minimum=True, maximum=10, training_only=True),
    Setting("worker_optimizer", str, "adam", "Worker optimizer",
            "The optimizer each worker trains with (horovod — one rank is plain Keras — and averaging): adam "
            "(Keras' defaults), adagrad (accumulators start at 0.1, as on the Downpour server; try a learning rate "
            "near 0.1), sgd, or momentum (SGD with momentum 0.9). Downpour's workers step with server_optimizer "
            "instead, so a downpour run refuses any value here but the default.",
            TRAINING, choices=OPTIMIZERS, training_only=True),
    Setting("precision", str, "float32", "Compute precision",
            "float32, or mixed_bfloat16: every layer computes in bfloat16 while the weights, the optimizer and the "
            "loss stay float32 (Keras' mixed precision; saved models are float32 weights, evaluated in float32). "
            "Only where the CPU multiplies bfloat16 itself (AMX or AVX512-BF16, read from /proc/cpuinfo): a worker "
            "without it refuses to train. Faster for some models, not others (make bench-roofline measures "
            "each), and it cost MNIST about 0.1 point of validation accuracy (README, Benchmarks).",
            TRAINING, choices=PRECISIONS, training_only=True),
    Setting("warmup_epochs", int, 1, "Warm-up epochs",
            "Epochs over which the learning rate ramps from the one-worker value to the scaled one.", TRAINING,
            minimum=0, maximum=1000, training_only=True),
    Setting("learning_rate_decay", str, "none", "Learning-rate decay (Horovod)",
            "none: the scaled rate stays after the warm-up. cosine: after the warm-up it follows a half cosine "
            "from the scaled rate down to 0 at the end of the last epoch, step by step — what large global "
            "batches need to settle (Goyal et al. 2017 warm up; Loshchilov & Hutter 2017 decay).", TRAINING,
            choices=LEARNING_RATE_DECAYS, training_only=True),
    Setting("weight_average_decay", float, 0.0, "Weight averaging: decay (Horovod)",
            "0: off. Otherwise an exponential moving average of the weights is kept beside training, moved "
            "towards them after every step by 1 − this decay (0.999 averages about the last 1,000 steps); "
            "evaluations, time-to-target and the saved model use the average, training itself is unchanged, and "
            "the trained weights' accuracy is logged beside it (val_accuracy_trained_weights). Polyak & "
            "Juditsky 1992. Horovod only.", TRAINING, minimum=0, maximum=0.99999, training_only=True),
    Setting("seed", int, 0, "Seed", "Seeds augmentation, sharding and weight initialisation.", TRAINING,
            minimum=0, maximum=2**31 - 1),
    Setting("target_accuracy", float, 0.99, "Target accuracy",
            "Time-to-target is the training time until the validation accuracy first reaches this.", TRAINING,
            minimum=0, exclusive_minimum=True, maximum=1, training_only=True),
    _positive("evaluations_per_epoch", int, 4, "Evaluations per epoch",
              "How often validation accuracy is measured during training (for time-to-target). Measuring never changes "
              "what is trained.", TRAINING, maximum=1000, training_only=True),
    _positive("rounds_per_epoch", int, 4, "Averaging: rounds per epoch",
              "Model averaging only: how many times per epoch the workers' weights are averaged (communication "
              "rounds); each round trains every worker on its next part of its shard.", TRAINING, maximum=10_000,
              training_only=True),
    Setting("fp16_compression", bool, False, "fp16 gradient compression",
            "Send gradients as float16: half the bytes on the wire.", HOROVOD, training_only=True),
    _positive("backward_passes_per_step", int, 1, "Backward passes per step",
              "Accumulate gradients locally over this many batches before each all-reduce.", HOROVOD, maximum=1024,
              training_only=True),
    _positive("n_fetch", int, 4, "Downpour: fetch every n steps",
              "A worker fetches fresh parameters from the server every n_fetch of its steps (Dean et al.'s "
              "n_fetch).", DOWNPOUR, maximum=100_000, training_only=True),
    _positive("n_push", int, 4, "Downpour: push every n steps",
              "A worker pushes the gradients it accumulated every n_push of its steps, taking local steps in "
              "between; larger values talk less and scale better (Dean et al.'s n_push).", DOWNPOUR,
              maximum=100_000, training_only=True),
    _positive("ps_shards", int, 2, "Downpour: parameter-server shards",
              "The parameters are split into this many slices, each served and updated on its own.", DOWNPOUR,
              maximum=64, training_only=True),
    Setting("server_optimizer", str, "adagrad", "Downpour: server optimizer",
            "How the server applies a pushed gradient: adagrad (per-parameter step sizes, as in Downpour SGD), "
            "plain sgd, momentum (SGD with momentum 0.9) or adam (Keras' β and ε; use a server learning rate near "
            "0.001). Workers take their local steps between pushes with the same rule.", DOWNPOUR,
            choices=OPTIMIZERS, training_only=True),
    Setting("server_learning_rate", float, 0.1, "Downpour: server learning rate",
            "Step size of the server's optimizer, also used for the workers' local steps between pushes.",
            DOWNPOUR, minimum=0, exclusive_minimum=True, maximum=100, training_only=True),
    Setting("staleness_aware", bool, False, "Downpour: staleness-aware steps",
            "Scale each push's step by 1 / its staleness (server versions applied since the pushing worker last "
            "fetched; Zhang et al. 2016), so a gradient computed on old parameters moves them less.", DOWNPOUR,
            training_only=True),
    Setting("push_as_steps", bool, False, "Downpour: apply a push as its steps",
            "A push holds the sum of n_push worker steps' gradients. Off (Downpour SGD as published): the server "
            "takes one optimizer step with it, and since Adagrad's and Adam's step does not grow with the "
            "gradient, the shared parameters move about one worker step per push. On: the server takes n_push "
            "steps, each with the mean gradient, and moves as far as the worker did.", DOWNPOUR, training_only=True),
    Setting("warm_start_steps", int, 0, "Downpour: warm-start steps",
            "Worker 0 trains alone for this many steps before the others join (the paper's remedy for early "
            "instability); 0 starts everyone at once.", DOWNPOUR, minimum=0, maximum=10_000_000, training_only=True),
    Setting("max_push_norm", float, 100.0, "Downpour: largest push (gradient norm per step)",
            "Each parameter-server shard scales down its slice of a push whose L2 norm, divided by the steps the "
            "push accumulates, exceeds this, so one diverging worker cannot wreck the shared parameters (healthy "
            "pushes measured ≤ 1.4 per step on the MNIST CNN); pushes holding NaN or infinity are refused. 0 "
            "turns clipping off.", DOWNPOUR, minimum=0, maximum=1e12, training_only=True),
    Setting("communication", bool, True, "Communication",
            "false: the ceiling. Every worker runs its strategy's own training loop and data path on its shard "
            "but sends nothing to train: no all-reduce, no parameter-server pushes or fetches, no averaging. The "
            "throughput it measures is the upper bound this configuration can reach; the model is not a trained "
            "distributed model (each worker trains its own; worker 0's is evaluated and saved).", ADVANCED,
            training_only=True),
    Setting("threads_per_worker", int, 0, "Threads per worker (0 = automatic)",
            "TensorFlow intra-op threads per worker; 0 means the node's cores ÷ workers per node.", ADVANCED,
            minimum=0, maximum=1024, training_only=True),
    Setting("existing_shards", str, "", "Existing shards (optional)",
            "URI of shards made earlier to train on instead of sharding for this run; needs at least one shard "
            "per worker.", ADVANCED, optional=True, uri_schemes=DATASET_SCHEMES, empty_means="shard for this run"),
    Setting("spark_master", str, "", "Spark master (optional)",
            "Where the Spark steps run: local[*] or local[N] (this machine), yarn (the Hadoop cluster of "
            "$HADOOP_CONF_DIR; one executor per node), spark://host:port (standalone). Empty: the Airflow "
            "spark_default connection's master in a DAG run; on the command line spark-submit's, else "
            "$CLOUDBURST_SPARK_MASTER, else local[*].", CLUSTER, optional=True,
            pattern=rf"local(\[(\*|[1-9][0-9]{{0,3}})\])?|yarn|spark://[A-Za-z0-9.-]+:{PORT_PATTERN}"
                    rf"(,[A-Za-z0-9.-]+:{PORT_PATTERN})*",
            pattern_help="must be local, local[*], local[N], yarn or spark://host:port", metavar="MASTER",
            empty_means="spark-submit's, else $CLOUDBURST_SPARK_MASTER, else local[*]"),
    Setting("link_rate", str, "", "Link rate (namespace cluster only, optional)",
            "Before training, re-shape every host link of the namespace cluster (make cluster-up) to this rate, "
            "e.g. 100mbit or 10gbit: tc tbf, bandwidth only. Empty: the links stay as they are. A scaling study's "
            "link profiles set it; the cluster must be up and spark_master yarn.", CLUSTER, optional=True,
            pattern=LINK_RATE_PATTERN, pattern_help="must be a rate from 1mbit to 100gbit such as 100mbit, 1gbit "
            "or 10gbit (a whole number, then mbit or gbit)", metavar="RATE", empty_means="links left as they are"),
    Setting("data_root", str, "", "Data root (optional)",
            "Where datasets and runs live: a path, file:// or hdfs:// URI. Empty: $CLOUDBURST_DATA_ROOT or "
            "./var/datasets.", ADVANCED, optional=True, uri_schemes=DATASET_SCHEMES,
            empty_means="$CLOUDBURST_DATA_ROOT or ./var/datasets"),
    Setting("tracking_uri", str, "", "MLflow tracking URI (optional)",
            "Empty: $MLFLOW_TRACKING_URI or SQLite under ./var/mlflow.", ADVANCED, optional=True,
            uri_schemes=TRACKING_SCHEMES, empty_means="$MLFLOW_TRACKING_URI or SQLite under ./var/mlflow"),
    Setting("run_name", str, "manual", "Run name (optional)",
            "Names the run's directory (checkpoints, model) and its MLflow run. Empty on the form: derived from "
            f"the DAG run id, so a retried task resumes the same run. Up to {RUN_NAME_MAX_LENGTH} letters, digits "
            "and _ . -, a letter or digit first (it names a directory, also on HDFS).", ADVANCED,
            pattern=RUN_NAME_PATTERN, pattern_help=RUN_NAME_HELP, max_length=RUN_NAME_MAX_LENGTH, metavar="NAME"),
)
_SHARED_BY_NAME = {entry.name: entry for entry in SHARED_SETTINGS}


def shared_setting(name: str) -> Setting:
    """The shared setting called ``name`` (KeyError for another); training.config.setting also knows workloads'."""
    return _SHARED_BY_NAME[name]


# Workload packages use these for their own settings.
__all__ = ["ADVANCED", "AUGMENTATION", "CLUSTER", "DATA", "DATASET_SCHEMES", "DOWNPOUR", "HOROVOD",
           "SECTIONS", "TRAINING", "DEFAULT_WORKLOAD", "RunSettings", "RunSpecError", "SHARED_SETTINGS", "STRATEGIES",
           "OPTIMIZERS", "Setting", "shared_setting", "shown"]
