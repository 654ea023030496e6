"""A toy third workload, as a new maintainer would add one: this package and one `workload_dag("toy_dense")` call.

Three Gaussian blobs in 8 dimensions, a tiny dense classifier; its shard step is a Spark job of its own (shard.py).
Registered through $CLOUDBURST_WORKLOADS=toy_workload with tests/ on PYTHONPATH (both environments, Spark's
workers and Horovod's ranks inherit them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from training.contract import EVALUATE, INGEST, SHARD, TRAIN
from training.workload_definition import WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec


def blobs_uri(spec: RunSpec) -> str:
    return f"{spec.resolved_data_root().rstrip('/')}/toy/blobs-seed{spec.seed}"


DEFINITION = WorkloadDefinition(
    name="toy_dense",
    title="Toy dense classifier",
    description="Gaussian blobs: ingest → shard → train → evaluate",
    steps=(INGEST, SHARD, TRAIN, EVALUATE),
    raw_uri=blobs_uri,
    train_uri=blobs_uri,  # no augmentation step: training reads the ingested dataset
    ingest="toy_workload.trainable:ingest",
    trainable="toy_workload.trainable:trainable",
    default_source="generated",
    defaults={"epochs": 2, "batch_size_per_worker": 32, "learning_rate": 0.01, "target_accuracy": 0.8,
              "augment_copies": 0, "evaluations_per_epoch": 2, "rounds_per_epoch": 2, "server_learning_rate": 0.05},
    tags=("toy",),
    step_jobs={SHARD: "toy_workload.shard"},  # a Spark step of its own (shard.py), spark-submitted by the DAG
)
