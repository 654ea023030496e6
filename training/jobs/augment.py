"""Spark job: add ``copies`` elastic deformations of every training image (originals kept, test untouched).

    spark-submit training/jobs/augment.py --source URI --dest URI --copies 1 --alpha 34 --sigma 4 --seed 0
"""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from training import dataset_names, storage
from training.augment import elastic
from training.console import configure_logging, step
from training.datasets import image_records, mnist

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SPARK_IMAGE_SCHEMA = "index long, copy short, label byte, image binary"
# Small enough that one block of float32 work stays in a core's cache: faster than whole Arrow batches.
DEFORM_BLOCK = 128


def default_raw_dataset() -> str:
    return dataset_names.raw_mnist(storage.data_root())


def default_augmented_dataset() -> str:
    """Where ``cloudburst augment`` with every default writes."""
    return dataset_names.elastic(default_raw_dataset(), 1, elastic.DEFAULT_ALPHA, elastic.DEFAULT_SIGMA, 0)


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


def write_parquet(frame: DataFrame, staging: storage.Location, name: str) -> None:
    """Write a DataFrame below the staging area, then give the part files stable names."""
    frame.write.mode("error").parquet(storage.join(staging.uri, name))
    normalise_part_names(staging, name)


def normalise_part_names(staging: storage.Location, name: str) -> None:
    """Spark names parts ``part-00003-<uuid>-c000…``; keep the task number only, so re-runs match byte for byte."""
    directory = f"{staging.path}/{name}"
    for path in staging.fs.ls(directory, detail=False):
        base = path.rsplit("/", 1)[1]
        if base.startswith("part-") and base.endswith(".parquet"):
            staging.fs.mv(path, f"{directory}/part-{base.split('-')[1]}.parquet")
        elif base.startswith(("_", ".")):
            staging.fs.rm(path)


def split_statistics(frame: DataFrame, num_classes: int = mnist.NUM_CLASSES) -> dict[str, Any]:
    histogram = [0] * num_classes
    for row in frame.groupBy("label").count().collect():
        histogram[int(row["label"])] = int(row["count"])
    return {"rows": sum(histogram), "class_histogram": histogram}


def augment_dataset(
    spark: SparkSession,
    source: str,
    destination: str,
    copies: int = 1,
    alpha: float = elastic.DEFAULT_ALPHA,
    sigma: float = elastic.DEFAULT_SIGMA,
    seed: int = 0,
    overwrite: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Publish ``source`` plus ``copies`` deformations per training image at ``destination``; (manifest, created)."""
    elastic.validate_parameters(alpha, sigma, copies, seed)
    source_manifest = storage.require_manifest(source, mnist.DATASET_KIND)
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
        with step(log, "copying the test split (never augmented)"):
            write_parquet(spark.read.schema(SPARK_IMAGE_SCHEMA).parquet(storage.join(source, "test")), staging, "test")
        splits = {
            split: split_statistics(spark.read.parquet(storage.join(staging.uri, split))) for split in ("train", "test")
        }
        _write_preview(staging, source, shape, augmentation)
        return {
            "source": storage.to_uri(source),
            "image_shape": list(shape),
            "splits": splits,
            "augmentation": augmentation,
        }

    return storage.publish(destination, mnist.DATASET_KIND, recipe, write, overwrite=overwrite)


def _write_preview(staging: storage.Location, source: str, shape: tuple[int, int], augmentation: dict) -> None:
    import pyarrow.parquet as pq

    from training.augment.preview import deformation_grid

    where = storage.resolve(source)
    first_file = sorted(name for name in storage.require_manifest(source)["files"] if name.startswith("train/"))[0]
    with where.fs.open(f"{where.path}/{first_file}", "rb") as handle:
        originals = image_records.from_table(pq.read_table(handle).slice(0, 8), shape)
    png = deformation_grid(
        originals, augmentation["seed"], augmentation["alpha"], augmentation["sigma"], columns=5
    )
    with staging.fs.open(f"{staging.path}/preview.png", "wb") as handle:
        handle.write(png)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", default=default_raw_dataset(),
                        help="raw image dataset URI (default: %(default)s)")
    parser.add_argument("--dest", default=None,
                        help="output URI (default: beside the source, named elastic-k<copies>-a<α>-s<σ>-seed<seed>)")
    parser.add_argument("--copies", type=int, default=1, help="deformed copies per training image (default: 1)")
    parser.add_argument("--alpha", type=float, default=elastic.DEFAULT_ALPHA,
                        help="displacement scale α in pixels (default: %(default)s)")
    parser.add_argument("--sigma", type=float, default=elastic.DEFAULT_SIGMA,
                        help="Gaussian smoothing σ in pixels (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace a different dataset at --dest")


def run(args: argparse.Namespace, master: str | None = None) -> str:
    """Run the job from parsed arguments; returns the destination URI."""
    from training.jobs.spark_session import spark_session

    elastic.validate_parameters(args.alpha, args.sigma, args.copies, args.seed)
    source = storage.to_uri(args.source)
    destination = args.dest or dataset_names.elastic(source, args.copies, args.alpha, args.sigma, args.seed)
    spark = spark_session("cloudburst-augment", master)
    manifest, created = augment_dataset(
        spark, args.source, destination, args.copies, args.alpha, args.sigma, args.seed, args.overwrite
    )
    verb = "published" if created else "already complete, nothing to do:"
    splits = manifest["splits"]
    log.info("%s %s (train %d rows, test %d rows, data_version %s)", verb, manifest["uri"],
             splits["train"]["rows"], splits["test"]["rows"], manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    configure_logging()
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
