"""What a workload is: its stdlib-only definition (steps, settings, defaults, dataset names — read by both
environments) and its trainable part (model, optimizer, readers — built in the training environment only)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from training.settings import Setting

if TYPE_CHECKING:
    import numpy as np

    from training.config import RunSpec


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
    raw_uri: Callable[[RunSpec], str]  # what ingest publishes
    train_uri: Callable[[RunSpec], str]  # what shard and train read (the augmented dataset, or raw_uri)
    ingest: str  # "module:function(spec, overwrite) -> (manifest, created)"
    trainable: str  # "module:function(spec) -> Trainable"
    default_source: str  # the offline default of data_source
    settings: tuple[Setting, ...] = ()  # settings only this workload has
    defaults: Mapping[str, Any] = field(default_factory=dict)  # this workload's defaults for shared settings
    source_help: str = ""  # what data_source accepts, for the form and --help
    check: Callable[[RunSpec], None] | None = None  # checks across settings; raises RunSpecError
    check_source: Callable[[RunSpec], None] | None = None  # the data source exists; raises RunSpecError
    assets: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # step → (Airflow asset name, URI)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Trainable:
    """The strategy-facing side of a workload: a strategy asks for a model and arrays, never which model it is."""

    name: str
    num_classes: int
    build_model: Callable[[], Any]
    make_optimizer: Callable[[float], Any]
    load_shard: Callable[[str, int, int], tuple[np.ndarray, np.ndarray]]  # (shards URI, rank, workers)
    load_split: Callable[[str, str], tuple[np.ndarray, np.ndarray]]  # (dataset URI, split name)
    class_names: tuple[str, ...] = ()
    # Workload-specific evaluation beyond accuracy: (model, predictions for load_split's test rows, in its order)
    # → (metrics, artifacts); keyword spotting's false accepts and per-voice-family accuracy.
    evaluate_further: Callable[[Any, np.ndarray], tuple[dict[str, float], dict[str, bytes]]] | None = None
    # Online augmentation of every training batch: (float32 model inputs, stateless seed int64[2]) → inputs of the
    # same shape; the strategies' input pipeline seeds it by run seed, worker and batch number. None: no change.
    augment_batch: Callable[[Any, Any], Any] | None = None

    def make_loss(self) -> Any:
        import tensorflow as tf

        return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
