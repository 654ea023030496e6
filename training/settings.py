"""The one table of run settings. Each setting is declared once — name, type, default, bounds, title, help,
form section — and everything else is derived from it: the RunSpec field (training.config), its validation, the
CLI flag of every job, the spark-submit arguments, the DAG Param and its trigger-form widget, the MLflow param.

Settings every workload shares are declared here; a workload declares its own in its package
(training/workloads/<name>/) and may change a shared setting's default there. Standard library only: the Airflow
environment imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from training.contract import FEATURE_KINDS

# Trigger-form sections, in the order the form shows them.
DATA = "Data"
AUGMENTATION = "Augmentation"
CLUSTER = "Cluster shape"
TRAINING = "Training"
HOROVOD = "Horovod communication"
DOWNPOUR = "Downpour parameter server"
ADVANCED = "Advanced"

STRATEGIES = ("horovod", "downpour", "averaging")
OPTIMIZERS = ("adagrad", "sgd", "momentum", "adam")
LEARNING_RATE_DECAYS = ("none", "cosine")
RUN_NAME_PATTERN = r"[A-Za-z0-9_.-]+"
# A link rate the namespace cluster's tc can shape to, 1mbit to 100gbit (infra/cluster/netns.sh check_link).
LINK_RATE_PATTERN = r"[1-9][0-9]{0,4}mbit|([1-9][0-9]?|100)gbit"
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


class RunSpecError(ValueError):
    """A run setting is invalid; the message names the setting and says why."""


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
    optional: bool = False  # a string setting that may be empty: the empty value means "automatic"
    on_form: bool = True  # the workload setting is fixed by each DAG, so it is not on the form

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

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
            raise RunSpecError(f"{self.name}={value!r}: expected {self.type.__name__}") from None

    def check(self, value: Any) -> None:
        """Raise RunSpecError naming this setting when ``value`` is outside its bounds."""
        if self.choices is not None and value not in self.choices:
            self._reject(value, f"must be one of {', '.join(map(str, self.choices))}")
        if self.minimum is not None:
            if self.exclusive_minimum and not value > self.minimum:
                self._reject(value, f"must be > {self.minimum:g}")
            if not self.exclusive_minimum and not value >= self.minimum:
                self._reject(value, f"must be ≥ {self.minimum:g}")
        if self.maximum is not None and not value <= self.maximum:
            self._reject(value, f"must be ≤ {self.maximum:g}")
        if self.type is str:
            if value == "" and not self.optional:
                self._reject(value, "must not be empty")
            if value and self.pattern and re.fullmatch(self.pattern, value) is None:
                self._reject(value, self.pattern_hint())

    def pattern_hint(self) -> str:
        return self.pattern_help or f"must match {self.pattern}"

    def _reject(self, value: Any, why: str) -> None:
        raise RunSpecError(f"{self.name}={value!r}: {why}")

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
        if self.pattern and not self.optional:
            schema["pattern"] = f"^(?:{self.pattern})$"  # grouped: a top-level | must not escape the anchors
        return schema


def _positive(name: str, type_: type, default: Any, title: str, description: str, section: str,
              maximum: float | None = None) -> Setting:
    return Setting(name, type_, default, title, description, section, minimum=1, maximum=maximum)


SHARED_SETTINGS: tuple[Setting, ...] = (
    Setting("workload", str, "mnist_elastic_cnn", "Workload", "What to train; each DAG fixes its own.",
            on_form=False),
    Setting("data_source", str, "", "Data source",
            "Where the raw data comes from; empty: the workload's offline default (the vendored MNIST, a "
            "synthetic speech corpus). See each workload's form for what it accepts.", DATA, optional=True),
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
    Setting("strategy", str, "horovod", "Strategy",
            "How workers combine their work. horovod: synchronous ring all-reduce of gradients every step "
            "(Horovod on Spark, Gloo). downpour: asynchronous Downpour SGD, workers fetch from and push to a "
            "sharded parameter server in the Spark driver and never wait for each other. averaging: MapReduce "
            "model averaging, rounds_per_epoch rounds per epoch of local training, weights averaged by examples "
            "seen.", TRAINING, choices=STRATEGIES),
    _positive("epochs", int, 5, "Epochs", "Passes over the (augmented) training set.", TRAINING, maximum=10_000),
    _positive("batch_size_per_worker", int, 128, "Batch size per worker",
              "Examples per step on each worker; the global batch is this × total workers. Larger batches talk "
              "less often and scale better.", TRAINING, maximum=65_536),
    Setting("learning_rate", float, 0.001, "Learning rate (one worker)",
            "The worker optimizer's learning rate for one worker (horovod, averaging); Horovod scales it by the "
            "number of workers after a warm-up. Downpour uses server_learning_rate instead.", TRAINING, minimum=0,
            exclusive_minimum=True, maximum=10),
    Setting("worker_optimizer", str, "adam", "Worker optimizer",
            "The optimizer each worker trains with (horovod — one rank is plain Keras — and averaging): adam "
            "(Keras' defaults), adagrad (accumulators start at 0.1, as on the Downpour server; try a learning rate "
            "near 0.1), sgd, or momentum (SGD with momentum 0.9). Downpour's workers step with server_optimizer "
            "instead, so a downpour run refuses any value here but the default.",
            TRAINING, choices=OPTIMIZERS),
    Setting("warmup_epochs", int, 1, "Warm-up epochs",
            "Epochs over which the learning rate ramps from the one-worker value to the scaled one.", TRAINING,
            minimum=0, maximum=1000),
    Setting("learning_rate_decay", str, "none", "Learning-rate decay (Horovod)",
            "none: the scaled rate stays after the warm-up. cosine: after the warm-up it follows a half cosine "
            "from the scaled rate down to 0 at the end of the last epoch, step by step — what large global "
            "batches need to settle (Goyal et al. 2017 warm up; Loshchilov & Hutter 2017 decay).", TRAINING,
            choices=LEARNING_RATE_DECAYS),
    Setting("weight_average_decay", float, 0.0, "Weight averaging: decay (Horovod)",
            "0: off. Otherwise an exponential moving average of the weights is kept beside training, moved "
            "towards them after every step by 1 − this decay (0.999 averages about the last 1,000 steps); "
            "evaluations, time-to-target and the saved model use the average, training itself is unchanged, and "
            "the trained weights' accuracy is logged beside it (val_accuracy_trained_weights). Polyak & "
            "Juditsky 1992. Horovod only.", TRAINING, minimum=0, maximum=0.99999),
    Setting("seed", int, 0, "Seed", "Seeds augmentation, sharding and weight initialisation.", TRAINING,
            minimum=0, maximum=2**31 - 1),
    Setting("target_accuracy", float, 0.99, "Target accuracy",
            "Time-to-target is the training time until the test accuracy first reaches this.", TRAINING,
            minimum=0, exclusive_minimum=True, maximum=1),
    _positive("evaluations_per_epoch", int, 4, "Evaluations per epoch",
              "How often test accuracy is measured during training (for time-to-target). Measuring never changes "
              "what is trained.", TRAINING, maximum=1000),
    _positive("rounds_per_epoch", int, 4, "Averaging: rounds per epoch",
              "Model averaging only: how many times per epoch the workers' weights are averaged (communication "
              "rounds); each round trains every worker on its next part of its shard.", TRAINING, maximum=10_000),
    Setting("fp16_compression", bool, False, "fp16 gradient compression",
            "Send gradients as float16: half the bytes on the wire.", HOROVOD),
    _positive("backward_passes_per_step", int, 1, "Backward passes per step",
              "Accumulate gradients locally over this many batches before each all-reduce.", HOROVOD, maximum=1024),
    _positive("n_fetch", int, 4, "Downpour: fetch every n steps",
              "A worker fetches fresh parameters from the server every n_fetch of its steps (Dean et al.'s "
              "n_fetch).", DOWNPOUR, maximum=100_000),
    _positive("n_push", int, 4, "Downpour: push every n steps",
              "A worker pushes the gradients it accumulated every n_push of its steps, taking local steps in "
              "between; larger values talk less and scale better (Dean et al.'s n_push).", DOWNPOUR,
              maximum=100_000),
    _positive("ps_shards", int, 2, "Downpour: parameter-server shards",
              "The parameters are split into this many slices, each served and updated on its own.", DOWNPOUR,
              maximum=64),
    Setting("server_optimizer", str, "adagrad", "Downpour: server optimizer",
            "How the server applies a pushed gradient: adagrad (per-parameter step sizes, as in Downpour SGD), "
            "plain sgd, momentum (SGD with momentum 0.9) or adam (Keras' β and ε; use a server learning rate near "
            "0.001). Workers take their local steps between pushes with the same rule.", DOWNPOUR,
            choices=OPTIMIZERS),
    Setting("server_learning_rate", float, 0.1, "Downpour: server learning rate",
            "Step size of the server's optimizer, also used for the workers' local steps between pushes.",
            DOWNPOUR, minimum=0, exclusive_minimum=True, maximum=100),
    Setting("staleness_aware", bool, False, "Downpour: staleness-aware steps",
            "Scale each push's step by 1 / its staleness (server versions applied since the pushing worker last "
            "fetched; Zhang et al. 2016), so a gradient computed on old parameters moves them less.", DOWNPOUR),
    Setting("push_as_steps", bool, False, "Downpour: apply a push as its steps",
            "A push holds the sum of n_push worker steps' gradients. Off (Downpour SGD as published): the server "
            "takes one optimizer step with it, and since Adagrad's and Adam's step does not grow with the "
            "gradient, the shared parameters move about one worker step per push. On: the server takes n_push "
            "steps, each with the mean gradient, and moves as far as the worker did.", DOWNPOUR),
    Setting("warm_start_steps", int, 0, "Downpour: warm-start steps",
            "Worker 0 trains alone for this many steps before the others join (the paper's remedy for early "
            "instability); 0 starts everyone at once.", DOWNPOUR, minimum=0, maximum=10_000_000),
    Setting("max_push_norm", float, 100.0, "Downpour: largest push (gradient norm per step)",
            "Each parameter-server shard scales down its slice of a push whose L2 norm, divided by the steps the "
            "push accumulates, exceeds this, so one diverging worker cannot wreck the shared parameters (healthy "
            "pushes measured ≤ 1.4 per step on the MNIST CNN); pushes holding NaN or infinity are refused. 0 "
            "turns clipping off.", DOWNPOUR, minimum=0, maximum=1e12),
    Setting("communication", bool, True, "Communication",
            "false: the ceiling. Every worker runs its strategy's own training loop and data path on its shard "
            "but sends nothing to train: no all-reduce, no parameter-server pushes or fetches, no averaging. The "
            "throughput it measures is the upper bound this configuration can reach; the model is not a trained "
            "distributed model (each worker trains its own; worker 0's is evaluated and saved).", ADVANCED),
    Setting("threads_per_worker", int, 0, "Threads per worker (0 = automatic)",
            "TensorFlow intra-op threads per worker; 0 means the node's cores ÷ workers per node.", ADVANCED,
            minimum=0, maximum=1024),
    Setting("existing_shards", str, "", "Existing shards (optional)",
            "URI of shards made earlier to train on instead of sharding for this run; needs at least one shard "
            "per worker.", ADVANCED, optional=True),
    Setting("spark_master", str, "", "Spark master (optional)",
            "Where the Spark steps run: local[*] or local[N] (this machine), yarn (the Hadoop cluster of "
            "$HADOOP_CONF_DIR; one executor per node), spark://host:port (standalone). Empty: the Airflow "
            "spark_default connection's master in a DAG run; on the command line spark-submit's, else "
            "$CLOUDBURST_SPARK_MASTER, else local[*].", CLUSTER, optional=True,
            pattern=r"local(\[(\*|[1-9][0-9]*)\])?|yarn|spark://[A-Za-z0-9.-]+:[0-9]+(,[A-Za-z0-9.-]+:[0-9]+)*",
            pattern_help="must be local, local[*], local[N], yarn or spark://host:port"),
    Setting("link_rate", str, "", "Link rate (namespace cluster only, optional)",
            "Before training, re-shape every host link of the namespace cluster (make cluster-up) to this rate, "
            "e.g. 100mbit or 10gbit: tc tbf, bandwidth only. Empty: the links stay as they are. A scaling study's "
            "link profiles set it; the cluster must be up and spark_master yarn.", CLUSTER, optional=True,
            pattern=LINK_RATE_PATTERN, pattern_help="must be a rate from 1mbit to 100gbit such as 100mbit, 1gbit "
            "or 10gbit (a whole number, then mbit or gbit)"),
    Setting("data_root", str, "", "Data root (optional)",
            "Where datasets and runs live: a path, file:// or hdfs:// URI. Empty: $CLOUDBURST_DATA_ROOT or "
            "./var/datasets.", ADVANCED, optional=True),
    Setting("tracking_uri", str, "", "MLflow tracking URI (optional)",
            "Empty: $MLFLOW_TRACKING_URI or SQLite under ./var/mlflow.", ADVANCED, optional=True),
    Setting("run_name", str, "manual", "Run name (optional)",
            "Names the run's directory (checkpoints, model) and its MLflow run. Empty on the form: derived from "
            "the DAG run id, so a retried task resumes the same run. Letters, digits and _ . - only (it names a "
            "directory, also on HDFS).", ADVANCED, pattern=RUN_NAME_PATTERN,
            pattern_help="may hold only letters, digits and _ . - (it names a directory, also on HDFS)"),
)

# Workload packages use these for their own settings.
__all__ = ["ADVANCED", "AUGMENTATION", "CLUSTER", "DATA", "DOWNPOUR", "FEATURE_KINDS", "HOROVOD", "TRAINING",
           "RunSpecError", "SHARED_SETTINGS", "STRATEGIES", "OPTIMIZERS", "Setting"]
