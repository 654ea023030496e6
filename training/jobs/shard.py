"""Spark job (step ``shard``): split the run's training dataset into N = nodes × workers_per_node stratified,
deterministic shards.

    spark-submit training/jobs/shard.py --workload mnist_elastic_cnn --nodes 1 --workers-per-node 2 --seed 0
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from training import sharding, storage
from training.console import step
from training.datasets.image_records import require_records
from training.jobs.spark_records import spark_image_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)


def shard_dataset(
    spark: SparkSession, source: str, destination: str, num_shards: int, seed: int = 0, overwrite: bool = False
) -> tuple[dict[str, Any], bool]:
    """Publish the shards of ``source``'s training split at ``destination``; (manifest, created)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    source_manifest = require_records(source)
    train_rows = source_manifest["splits"]["train"]["rows"]
    sharding.validate_shard_count(num_shards, train_rows)
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed}")
    num_classes = len(source_manifest["splits"]["train"]["class_histogram"])
    recipe = {"source_data_version": source_manifest["data_version"], "num_shards": num_shards, "seed": seed}

    def write(staging: storage.Location) -> dict[str, Any]:
        train = spark.read.schema(spark_image_schema(num_classes)).parquet(storage.join(source, "train"))
        class_sizes = source_manifest["splits"]["train"]["class_histogram"]
        # Each class starts dealing where the previous one stopped, so shard totals stay within one too.
        class_offsets = [sum(class_sizes[:label]) % num_shards for label in range(num_classes)]
        order_key = F.xxhash64(F.lit(seed), "index", "copy")
        rank_in_class = F.row_number().over(Window.partitionBy("label").orderBy("order_key", "index", "copy")) - 1
        offset = F.element_at(F.array(*[F.lit(o) for o in class_offsets]), F.col("label").cast("int") + 1)
        assigned = (
            train.withColumn("order_key", order_key)
            .withColumn("shard", ((rank_in_class + offset) % num_shards).cast("int"))
            .repartition(num_shards, "shard")
            .sortWithinPartitions("shard", "order_key")
            .drop("order_key")
        )
        with step(log, f"dealing {train_rows} examples into {num_shards} shards"):
            assigned.write.partitionBy("shard").parquet(storage.join(staging.uri, "parts"))
        shards = _collect_shards(staging, num_shards, num_classes)
        staging.fs.rm(f"{staging.path}/parts", recursive=True)
        return {
            "source": storage.to_uri(source),
            "source_data_version": source_manifest["data_version"],
            "image_shape": source_manifest["image_shape"],
            "image_dtype": source_manifest.get("image_dtype", "uint8"),
            "class_names": source_manifest.get("class_names"),
            "num_shards": num_shards,
            "seed": seed,
            "rows": train_rows,
            "shards": shards,
        }

    return storage.publish(destination, sharding.DATASET_KIND, recipe, write, overwrite=overwrite)


def _collect_shards(staging: storage.Location, num_shards: int, num_classes: int) -> list[dict[str, Any]]:
    """Move ``parts/shard=K/part-*.parquet`` to ``shard-0000K.parquet`` and describe each shard."""
    import numpy as np
    import pyarrow.parquet as pq

    shards = []
    for shard in range(num_shards):
        parts = staging.fs.glob(f"{staging.path}/parts/shard={shard}/part-*.parquet")
        if len(parts) != 1:
            raise RuntimeError(f"shard {shard}: expected one part file from Spark, found {len(parts)}")
        target = f"{staging.path}/{sharding.shard_file_name(shard)}"
        staging.fs.mv(parts[0], target)
        with staging.fs.open(target, "rb") as handle:
            labels = pq.read_table(handle, columns=["label"]).column("label").to_numpy()
        histogram = np.bincount(labels.astype(np.int64), minlength=num_classes).tolist()
        shards.append({"shard": shard, "file": sharding.shard_file_name(shard), "rows": int(len(labels)),
                       "class_histogram": histogram})
    return shards


def run_step(spec: RunSpec, master: str | None = None, overwrite: bool = False) -> str:
    """The pipeline step: one shard per worker of the run's training dataset (nothing to do with existing_shards)."""
    from training.jobs.spark_session import LazySparkSession

    if spec.existing_shards:
        log.info("training on existing shards %s: nothing to shard", spec.existing_shards)
        return spec.existing_shards
    require_records(spec.augmented_uri())  # before the JVM starts
    spark = LazySparkSession("cloudburst-shard", master, spec)  # started only if there is work
    manifest, created = shard_dataset(spark, spec.augmented_uri(), spec.shards_uri(), spec.total_workers, spec.seed,
                                      overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    sizes = [shard["rows"] for shard in manifest["shards"]]
    log.info("%s %s (%d shards, rows per shard %d–%d, data_version %s)", verb, manifest["uri"],
             manifest["num_shards"], min(sizes), max(sizes), manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=True, argv=argv)


if __name__ == "__main__":
    main()
