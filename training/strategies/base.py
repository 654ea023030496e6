"""The one small interface every distribution strategy implements, and what training returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from training.contract import VALIDATION_SPLIT
from training.settings import RunSettings

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import SparkSession



class TrainingInterruptedError(RuntimeError):
    """Training stopped part-way for a reason outside the run's settings (a worker host lost mid-Horovod, …); the
    message says what happened and what the checkpoints keep. The train step reports it in one line."""


@dataclass(frozen=True)
class EvaluationSet:
    """What a strategy measures val_accuracy on: one split of a dataset — its validation split; the test split is
    the evaluate step's, read once at the end — read through the workload."""

    dataset_uri: str
    split: str = VALIDATION_SPLIT

    def load(self, workload: Any) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, labels) in the model's layout, from the workload ``RunSpec.trainable()`` returned."""
        return workload.load_split(self.dataset_uri, self.split)


@dataclass
class TrainingResult:
    """What a strategy measured. Per-epoch rows use the shared metric names (train_loss, val_accuracy, …)."""

    epochs: list[dict[str, float | None]]  # train_loss/train_accuracy may be None for an earlier attempt's epochs
    evaluations: list[dict[str, float]]  # {"train_seconds", "epoch", "val_accuracy"}, several per epoch
    wall_seconds: float  # strategy start to finish: process launch, data loading and training
    training_seconds: float  # the training clock: training steps only, evaluations excluded
    time_to_target_seconds: float | None  # training clock when val_accuracy first reached the target
    model_uri: str
    total_workers: int
    resumed_from_epoch: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # strategy facts; scalars become MLflow tags
    metrics: dict[str, float] = field(default_factory=dict)  # strategy measurements, logged as MLflow metrics

    def to_mapping(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> TrainingResult:
        return cls(**values)


class Strategy(Protocol):
    """Trains ``spec.workload`` on the shards at ``shards_uri`` with ``spec.total_workers`` workers, measuring
    accuracy on ``evaluation`` as it goes; checkpoints and the final model go under ``run_uri``."""

    name: str

    def train(self, spec: RunSettings, shards_uri: str, evaluation: EvaluationSet, run_uri: str,
              spark: SparkSession) -> TrainingResult: ...
