"""N stratified, deterministic shards of a training split, one Parquet file each, readable with pyarrow alone.

The rule: within each class, examples are ordered by a seeded hash of (index, copy) and dealt round-robin
to the shards, starting where the previous class stopped. So every example lands in exactly one shard, the
shards of one class differ in size by at most one, and so do the shards' totals.
"""

from __future__ import annotations

import pyarrow as pa

from training import storage
from training.contract import IMAGE_SHARDS
from training.datasets.image_records import ImageBatch, from_table

DATASET_KIND = IMAGE_SHARDS


def shard_file_name(shard: int) -> str:
    return f"shard-{shard:05d}.parquet"


def validate_shard_count(num_shards: int, rows: int | None = None) -> None:
    if int(num_shards) != num_shards or num_shards < 1:
        raise ValueError(f"the number of shards must be an integer ≥ 1, got {num_shards}")
    if rows == 0:
        raise ValueError("the dataset has no training examples (an evaluation-only corpus?): nothing to shard or "
                         "train on")
    if rows is not None and num_shards > rows:
        raise ValueError(f"{num_shards} shards for {rows} examples would leave shards empty")


def shard_count(nodes: int, workers_per_node: int) -> int:
    """One shard per training worker: nodes × workers_per_node."""
    for name, value in (("nodes", nodes), ("workers_per_node", workers_per_node)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be an integer ≥ 1, got {value}")
    return nodes * workers_per_node


def read_shard(shards: str, shard: int) -> pa.Table:
    """The rows of one shard, in their shuffled order; needs no Spark."""
    manifest = storage.require_manifest(shards, DATASET_KIND)
    if not 0 <= shard < manifest["num_shards"]:
        raise storage.DatasetError(f"{shards}: shard {shard} out of range 0..{manifest['num_shards'] - 1}")
    return storage.read_published_parquet(shards, manifest, shard_file_name(shard))


def shards_of_worker(rank: int, workers: int, num_shards: int) -> list[int]:
    """Shards a worker reads: its own, plus every ``workers``-th one after it when there are more shards."""
    if workers > num_shards:
        raise ValueError(f"{workers} workers but only {num_shards} shards: every worker needs one")
    return list(range(rank, num_shards, workers))


def read_worker_images(shards: str, rank: int, workers: int) -> ImageBatch:
    """The examples of one worker, read with pyarrow alone."""
    manifest = storage.require_manifest(shards, DATASET_KIND)
    tables = [read_shard(shards, shard) for shard in shards_of_worker(rank, workers, manifest["num_shards"])]
    return from_table(pa.concat_tables(tables), tuple(manifest["image_shape"]), manifest.get("image_dtype", "uint8"))


def read_shard_images(shards: str, shard: int) -> ImageBatch:
    manifest = storage.require_manifest(shards, DATASET_KIND)
    return from_table(read_shard(shards, shard), tuple(manifest["image_shape"]), manifest.get("image_dtype", "uint8"))
