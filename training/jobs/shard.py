"""Spark job: split a dataset's training split into N stratified, deterministic shards (N = nodes × workers).

    spark-submit training/jobs/shard.py --source URI --dest URI --shards 2 --seed 0
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from training import dataset_names, sharding, storage
from training.console import configure_logging, step
from training.jobs.augment import SPARK_IMAGE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def shard_dataset(
    spark: SparkSession, source: str, destination: str, num_shards: int, seed: int = 0, overwrite: bool = False
) -> tuple[dict[str, Any], bool]:
    """Publish the shards of ``source``'s training split at ``destination``; (manifest, created)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    source_manifest = storage.require_manifest(source)
    if source_manifest.get("kind") not in sharding.SHARDABLE_KINDS:
        raise storage.DatasetError(f"{source}: a {source_manifest.get('kind')!r} dataset cannot be sharded "
                                   f"(expected one of {', '.join(sharding.SHARDABLE_KINDS)})")
    train_rows = source_manifest["splits"]["train"]["rows"]
    sharding.validate_shard_count(num_shards, train_rows)
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed}")
    num_classes = len(source_manifest["splits"]["train"]["class_histogram"])
    recipe = {"source_data_version": source_manifest["data_version"], "num_shards": num_shards, "seed": seed}

    def write(staging: storage.Location) -> dict[str, Any]:
        train = spark.read.schema(SPARK_IMAGE_SCHEMA).parquet(storage.join(source, "train"))
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", default=None,
                        help="dataset URI whose train split is sharded: augmented MNIST or keyword-spotting "
                             "features (default: the augmented MNIST from 'cloudburst augment' with its defaults)")
    parser.add_argument("--dest", default=None, help="output URI (default: <source>-shards<N>-seed<seed>)")
    parser.add_argument("--shards", type=int, default=None,
                        help="number of shards N; default nodes × workers-per-node")
    parser.add_argument("--nodes", type=int, default=1, help="training nodes (default: 1)")
    parser.add_argument("--workers-per-node", type=int, default=2, help="training workers per node (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="shuffle seed (default: 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace a different dataset at --dest")


def run(args: argparse.Namespace, master: str | None = None) -> str:
    """Run the job from parsed arguments; returns the destination URI."""
    from training.jobs.augment import default_augmented_dataset
    from training.jobs.spark_session import spark_session

    num_shards = args.shards if args.shards is not None else sharding.shard_count(args.nodes, args.workers_per_node)
    sharding.validate_shard_count(num_shards)
    source = args.source or default_augmented_dataset()
    destination = args.dest or dataset_names.shards(storage.to_uri(source), num_shards, args.seed)
    spark = spark_session("cloudburst-shard", master)
    manifest, created = shard_dataset(spark, source, destination, num_shards, args.seed, args.overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    sizes = [shard["rows"] for shard in manifest["shards"]]
    log.info("%s %s (%d shards, rows per shard %d–%d, data_version %s)", verb, manifest["uri"],
             manifest["num_shards"], min(sizes), max(sizes), manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    configure_logging()
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
