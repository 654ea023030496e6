"""Wall time of the data half of the pipeline on the full MNIST: ingest → augment (k=1) → shard (N=2).

Runs into a fresh temporary data root with Spark local[*]; the JVM start is counted in the first Spark step.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from results import publish_run, recorded_as, table

from training.console import configure_logging
from training.jobs.shard import shard_dataset
from training.jobs.spark_session import spark_session
from training.workloads.mnist_elastic_cnn import VENDORED_MNIST, idx
from training.workloads.mnist_elastic_cnn.augment_job import augment_dataset

RUNS = {"bench-data-pipeline": ("make bench", [])}
STEPS = ("ingest", "spark_start", "augment", "shard")  # the values keys, in the order the steps run


def result_tables(seconds: dict[str, float], labels: dict[str, str], master: str) -> tuple[dict, dict]:
    """(values, tables) for docs/results: each step's seconds under its STEPS key and the total; the table "steps"
    as printed (``labels``: each key's printed name)."""
    values = {**{step: seconds[step] for step in STEPS}, "total": sum(seconds[step] for step in STEPS),
              "master": master}
    rows = [{"step": labels[step], "seconds": seconds[step]} for step in STEPS]
    rows.append({"step": "total", "seconds": values["total"]})
    return values, {"steps": table([("step", "step", "text"), ("seconds", "seconds", "s")], rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--augment-copies", dest="copies", type=int, default=1)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    run = recorded_as(parser, args, RUNS)
    configure_logging()
    os.environ.setdefault("CLOUDBURST_SPARK_UI", "false")
    with tempfile.TemporaryDirectory(prefix="cloudburst-bench-") as root:
        timings = {}
        started = time.perf_counter()
        idx.ingest(str(VENDORED_MNIST), f"{root}/raw")
        timings["ingest"] = time.perf_counter() - started
        started = time.perf_counter()
        spark = spark_session("cloudburst-bench", args.master)
        timings["spark start"] = time.perf_counter() - started
        started = time.perf_counter()
        augment_dataset(spark, f"{root}/raw", f"{root}/elastic", copies=args.copies)
        timings[f"augment k={args.copies}"] = time.perf_counter() - started
        started = time.perf_counter()
        shard_dataset(spark, f"{root}/elastic", f"{root}/shards", num_shards=args.shards)
        timings[f"shard N={args.shards}"] = time.perf_counter() - started
        spark.stop()
    print(f"data pipeline on the full MNIST (60,000 train images), Spark {args.master}:")
    for step_name, seconds in timings.items():
        print(f"  {step_name:<14} {seconds:7.1f} s")
    print(f"  {'total':<14} {sum(timings.values()):7.1f} s")
    labels = dict(zip(STEPS, timings, strict=True))
    publish_run(run, *result_tables({step: timings[label] for step, label in labels.items()},
                                    labels, args.master))


if __name__ == "__main__":
    main()
