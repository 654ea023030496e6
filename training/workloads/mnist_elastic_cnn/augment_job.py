"""MNIST's Spark job (step ``augment``, named in the workload's ``step_jobs``): add ``augment_copies`` elastic
deformations of every training image (originals kept, validation and test untouched).

    spark-submit training/workloads/mnist_elastic_cnn/augment_job.py --workload mnist_elastic_cnn \
        --augment-copies 1 --alpha 34 --sigma 4
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from training import storage
from training.console import step
from training.contract import EVALUATION_SPLITS
from training.datasets import image_records
from training.jobs.spark_records import SPARK_IMAGE_SCHEMA, split_statistics, write_parquet
from training.workloads.mnist_elastic_cnn import DEFAULT_ALPHA, DEFAULT_SIGMA, NUM_CLASSES, elastic
from training.workloads.mnist_elastic_cnn.idx import DATASET_KIND

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

# Small enough that one block of float32 work stays in a core's cache: faster than whole Arrow batches.
DEFORM_BLOCK = 128


def deform_record_batches(
    batches: Iterator[pa.RecordBatch], copies: int, alpha: float, sigma: float, seed: int, shape: tuple[int, int]
) -> Iterator[pa.RecordBatch]:
    """For each batch of originals, yield it unchanged, then one batch per deformed copy."""
    for batch in batches:
        table = pa.Table.from_batches([batch])
        originals = image_records.from_table(table, shape)
        yield batch
        for copy_number in range(1, copies + 1):
            copy = np.full(len(originals), copy_number, np.int16)
            deformed = np.empty_like(originals.images)
            for start in range(0, len(originals), DEFORM_BLOCK):
                block = slice(start, start + DEFORM_BLOCK)
                deformed[block] = elastic.elastic_deform(
                    originals.images[block], originals.index[block], copy[block], seed, alpha, sigma
                )
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(originals.index, pa.int64()),
                    pa.array(copy, pa.int16()),
                    pa.array(originals.labels, pa.int8()),
                    image_records.binary_column(deformed),
                ],
                names=["index", "copy", "label", "image"],
            )


def augment_dataset(
    spark: SparkSession,
    source: str,
    destination: str,
    copies: int = 1,
    alpha: float = DEFAULT_ALPHA,
    sigma: float = DEFAULT_SIGMA,
    seed: int = 0,
    overwrite: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Publish ``source`` plus ``copies`` deformations per training image at ``destination``; (manifest, created)."""
    elastic.validate_parameters(alpha, sigma, copies, seed)
    source_manifest = storage.require_manifest(source, DATASET_KIND)
    if source_manifest.get("augmentation"):
        raise storage.DatasetError(f"{source}: already augmented; augment the raw dataset instead")
    shape = tuple(source_manifest["image_shape"])
    augmentation = {"method": "elastic", "copies": copies, "alpha": alpha, "sigma": sigma, "seed": seed}
    recipe = {"source_data_version": source_manifest["data_version"], **augmentation}

    def write(staging: storage.Location) -> dict[str, Any]:
        train = spark.read.schema(SPARK_IMAGE_SCHEMA).parquet(storage.join(source, "train"))
        deform = functools.partial(
            deform_record_batches, copies=copies, alpha=alpha, sigma=sigma, seed=seed, shape=shape
        )
        with step(log, f"deforming {source_manifest['splits']['train']['rows']} training images × {copies}"):
            write_parquet(train.mapInArrow(deform, SPARK_IMAGE_SCHEMA), staging, "train")
        for split in EVALUATION_SPLITS:
            with step(log, f"copying the {split} split (never augmented)"):
                write_parquet(spark.read.schema(SPARK_IMAGE_SCHEMA).parquet(storage.join(source, split)), staging,
                              split)
        splits = {
            split: split_statistics(spark.read.parquet(storage.join(staging.uri, split)), NUM_CLASSES)
            for split in ("train", *EVALUATION_SPLITS)
        }
        _write_preview(staging, source, shape, augmentation)
        return {
            "source": storage.to_uri(source),
            "image_shape": list(shape),
            "splits": splits,
            "augmentation": augmentation,
        }

    return storage.publish(destination, DATASET_KIND, recipe, write, overwrite=overwrite)


def _write_preview(staging: storage.Location, source: str, shape: tuple[int, int], augmentation: dict) -> None:
    from training.workloads.mnist_elastic_cnn.preview import deformation_grid

    manifest = storage.require_manifest(source)
    first_file = sorted(name for name in manifest["files"] if name.startswith("train/"))[0]
    originals = image_records.from_table(storage.read_published_parquet(source, manifest, first_file).slice(0, 8),
                                         shape)
    png = deformation_grid(originals, augmentation["seed"], augmentation["alpha"], augmentation["sigma"])
    with staging.fs.open(f"{staging.path}/preview.png", "wb") as handle:
        handle.write(png)


def run_step(spec: RunSpec, master: str | None = None, overwrite: bool = False) -> str:
    """The pipeline step: augment the run's raw dataset; returns the published URI."""
    from training.jobs.spark_session import LazySparkSession

    storage.require_manifest(spec.raw_uri(), DATASET_KIND)  # before the JVM starts
    spark = LazySparkSession("cloudburst-augment", master, spec)  # started only if there is work
    manifest, created = augment_dataset(spark, spec.raw_uri(), spec.augmented_uri(), spec.augment_copies, spec.alpha,
                                        spec.sigma, spec.seed, overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    splits = manifest["splits"]
    log.info("%s %s (train %d rows, validation %d rows, test %d rows, data_version %s)", verb, manifest["uri"],
             splits["train"]["rows"], splits["validation"]["rows"], splits["test"]["rows"], manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=True, argv=argv)


if __name__ == "__main__":
    main()
