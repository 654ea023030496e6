"""The data half of the pipeline for a run specification, exactly as the DAG runs it (for training tests)."""

from __future__ import annotations

from training.config import RunSpec
from training.jobs.shard import shard_dataset
from training.workloads.mnist_elastic_cnn import idx
from training.workloads.mnist_elastic_cnn.augment_job import augment_dataset


def prepare_datasets(spark, spec: RunSpec) -> None:
    idx.ingest(spec.resolved_data_source(), spec.raw_uri(), train_limit=spec.train_limit, test_limit=spec.test_limit)
    augment_dataset(spark, spec.raw_uri(), spec.augmented_uri(), spec.augment_copies, spec.alpha, spec.sigma,
                    spec.seed)
    shard_dataset(spark, spec.augmented_uri(), spec.shards_uri(), spec.total_workers, spec.seed)
