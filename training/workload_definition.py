"""What a workload is: its stdlib-only definition (steps, settings, defaults, dataset names — read by both
environments) and its trainable part (model, optimizer, readers — built in the training environment only)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.settings import RunSettings, Setting

if TYPE_CHECKING:
    import numpy as np



@dataclass(frozen=True)
class WorkloadDefinition:
    """Everything the pipeline needs to know about a workload without importing TensorFlow.

    ``ingest`` and ``trainable`` name functions (``"module:function"``) that are imported only where they run: in the
    training environment. ``raw_uri``/``train_uri`` name the workload's datasets from the run specification alone,
    so every step and every retry finds the same place.
    """

    name: str
    title: str  # the DAG's display name
    description: str  # one line: the pipeline's shape
    steps: tuple[str, ...]  # pipeline stages in order (training.contract.STEPS)
    raw_uri: Callable[[RunSettings], str]  # what ingest publishes
    train_uri: Callable[[RunSettings], str]  # what shard and train read (the augmented dataset, or raw_uri)
    ingest: str  # "module:function(spec, overwrite) -> (manifest, created)"
    trainable: str  # "module:function(spec) -> Trainable"
    default_source: str  # the offline default of data_source
    settings: tuple[Setting, ...] = ()  # settings only this workload has
    defaults: Mapping[str, Any] = field(default_factory=dict)  # this workload's defaults for shared settings
    source_help: str = ""  # what data_source accepts, for the form and --help
    check: Callable[[RunSettings], None] | None = None  # checks across settings; raises RunSpecError
    # Whether a run's model normalizes batches: statistics beside its trainable weights, which a strategy that
    # shares trainable weights only (Downpour) refuses (training.strategy_rules). None: never.
    batch_norm: Callable[[RunSettings], bool] | None = None
    check_source: Callable[[RunSettings], None] | None = None  # the data source exists; raises RunSpecError
    assets: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # step → (Airflow asset name, URI)
    tags: tuple[str, ...] = ()
    # Steps this workload runs with a module of its own instead of training.jobs.<step> (run_step + main).
    step_jobs: Mapping[str, str] = field(default_factory=dict)
    # Parallel branches: ``branch_steps`` run once per branch, each with the settings of ``branches[name]`` and
    # ``branch_setting`` = name (speaker verification: features → shard → train for each embedding model). The
    # branch's run directory is its own (RunSpec.run_uri); the steps after the branches see every branch.
    branch_setting: str = ""
    branches: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    branch_steps: tuple[str, ...] = ()
    # Settings whose non-empty values name subdirectories of the run directory, in order (default: the branch).
    run_path_settings: tuple[str, ...] = ()
    # "module:function(spec) -> list[RunSettings]": the train step's runs in order, each trained like any run (its own
    # directory, checkpoints and MLflow run), the last one's result becoming the run's; it raises RunSpecError for
    # settings it cannot train, before any training starts. Empty: the run itself, once (speaker verification:
    # keyword spotter → head with the transferred trunk frozen → fine-tuning).
    training_stages: str = ""
    # Data-aware scheduling: the DAG also runs when another workload's asset (Airflow asset name, URI) gets an
    # event, with the event's "uri" (the run or dataset that published it) as ``scheduled_on_setting`` unless the
    # run's Params set that (speaker verification: a finished keyword spotter → transfer_from). None: manual only.
    scheduled_on: tuple[str, str] | None = None
    scheduled_on_setting: str = ""
    # Named bundles of settings (``--preset NAME`` on the command line, DEMO_PRESET for the demo): a preset fills
    # the settings it names, and a value given explicitly still wins (MNIST's "full": the long run for accuracy).
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The scaling study's budget estimate (training.study.plan): training examples of a full run without train_limit,
    # and one core's training seconds per example, measured on the project's 2-core machine.
    study_training_examples: int = 60_000
    study_seconds_per_example: float = 0.004

    def job_module(self, step: str) -> str:
        """The module that runs ``step`` for this workload (``python -m`` or spark-submit's file)."""
        from training.contract import job_module

        return self.step_jobs.get(step) or job_module(step)

    def job_file(self, step: str) -> Path:
        """The file spark-submit runs for ``step`` (its ``job_module``'s)."""
        from training.contract import module_file

        return module_file(self.job_module(step))


@dataclass(frozen=True)
class Trainable:
    """The strategy-facing side of a workload: a strategy asks for a model and arrays, never which model it is."""

    name: str
    num_classes: int
    build_model: Callable[[], Any]
    load_shard: Callable[[str, int, int], tuple[np.ndarray, np.ndarray]]  # (shards URI, rank, workers)
    load_split: Callable[[str, str], tuple[np.ndarray, np.ndarray]]  # (dataset URI, split name)
    class_names: tuple[str, ...] = ()
    # Workload-specific evaluation beyond accuracy: (model, predictions for load_split's test rows, in its order)
    # → (metrics, artifacts); keyword spotting's false accepts and per-voice-family accuracy.
    evaluate_further: Callable[[Any, np.ndarray], tuple[dict[str, float], dict[str, bytes]]] | None = None
    # Online augmentation of every training batch: (float32 model inputs, stateless seed int64[2]) → inputs of the
    # same shape; the strategies' input pipeline seeds it by run seed, worker and batch number. None: no change.
    augment_batch: Callable[[Any, Any], Any] | None = None
    # The training loss (one instance per process); None: sparse categorical cross-entropy on logits.
    loss: Callable[[], Any] | None = None
    # Called by every strategy at the start of each (0-based, absolute) epoch on every worker, before its steps:
    # speaker verification ramps the angular margin of its loss with it. None: nothing to do.
    begin_epoch: Callable[[int], None] | None = None
    # Measured on the trained model at each epoch's end, off the training clock, by every strategy (one process):
    # metrics that go into the epoch rows and MLflow's per-epoch curves — speaker verification's development EER,
    # its time-to-EER clock. None: nothing beyond accuracy.
    epoch_metrics: Callable[[Any], dict[str, float]] | None = None

    def make_loss(self) -> Any:
        if self.loss is not None:
            return self.loss()
        import tensorflow as tf

        return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def measure_epoch(self, model: Any) -> dict[str, float]:
        """``epoch_metrics`` of ``model`` (the strategies' one call per epoch end), or none."""
        return {} if self.epoch_metrics is None else {name: float(value)
                                                       for name, value in self.epoch_metrics(model).items()}

    def start_epoch(self, epoch: int) -> None:
        """The strategies' one call per epoch and worker (see ``begin_epoch``)."""
        if self.begin_epoch is not None:
            self.begin_epoch(epoch)
