"""Strategies side by side in one run, on the same data (full MNIST, k=1 elastic), 2 workers × 1 thread each.

Contenders, all with the same model, batch size per worker and evaluation schedule (4 per epoch):
  ceiling                2 independent 1-thread Keras processes, no communication: the most 2 workers can get
  keras, 2 threads       plain Keras in one process on both cores: what a user would run instead
  horovod 1x2            synchronous ring all-reduce every step (Horovod on Spark, Gloo)
  downpour n_push=k      asynchronous Downpour SGD, n_fetch = n_push = k, 2 server shards, Adagrad
  averaging 1x2          MapReduce model averaging, 4 rounds per epoch
  elephas …              Elephas 6.2.1 (installed into a throwaway environment by bench/elephas_peer.py)

Printed: samples/s (median over epochs after the first), its fraction of the ceiling, seconds to the target test
accuracy on each contender's training clock (evaluations excluded), final test accuracy and bytes moved between
processes (≈: Horovod's ring all-reduce volume computed from steps and model size, not counted on the wire).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scaling import BENCH_ROOT, ceiling, measured_from, median_throughput, prepare, train_fresh
from scaling import row as scaling_row

from training import storage

DOWNPOUR_PUSH_EVERY = (1, 4, 16)
ELEPHAS_MODES = (("synchronous", "epoch"), ("asynchronous", "batch"), ("asynchronous", "epoch"))


def keras_two_threads(spec) -> dict[str, Any]:
    """Plain Keras in a fresh process (TensorFlow's thread pools are sized once per process)."""
    command = [sys.executable, str(Path(__file__).with_name("scaling.py")), "--single-process",
               spec.with_changes(workers_per_node=1).to_json(), "--threads", "2", "--workers", "1", "--rank", "0"]
    output = subprocess.run(command, capture_output=True, text=True, check=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}).stdout
    return json.loads(output.strip().splitlines()[-1])


def train_strategy(spec, spark, run_name: str) -> dict[str, Any]:
    result = train_fresh(spec, spark, run_name)
    measured = {**measured_from(result), "bytes_moved": result.metrics.get("bytes_moved")}
    if spec.strategy == "horovod":  # ring all-reduce: each worker sends and receives 2·(N−1)/N of the gradients
        workers = spec.total_workers
        steps = result.extra["steps_per_epoch"] * len(result.epochs)
        measured["bytes_moved"] = steps * workers * 2 * 2 * (workers - 1) / workers * model_bytes(spec)
        measured["bytes_estimated"] = True
    return measured


def model_bytes(spec) -> int:
    from training.workloads import workload_for

    return sum(weights.nbytes for weights in workload_for(spec).build_model().get_weights())


def row(name: str, measured: dict[str, Any], ceiling_rate: float) -> str:
    """The scaling benchmark's row plus the bytes moved."""
    moved = measured.get("bytes_moved")
    moved_text = "–" if moved is None else f"{'≈' if measured.get('bytes_estimated') else ''}{moved / 1e9:,.2f} GB"
    return f"{scaling_row(name, measured, ceiling_rate)} {moved_text:>10} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=6, help="epochs per contender (default 6)")
    parser.add_argument("--batch", type=int, default=128, help="batch size per worker (default 128)")
    parser.add_argument("--target", type=float, default=0.99, help="target test accuracy (default 0.99)")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images only (smoke tests)")
    parser.add_argument("--server-learning-rate", type=float, default=None,
                        help="Downpour server learning rate (default: the run specification's)")
    parser.add_argument("--only", default="",
                        help="comma-separated contenders to run: ceiling, keras, horovod, downpour, averaging, "
                             "elephas (default: all; the ceiling always runs)")
    parser.add_argument("--push-every", default=",".join(map(str, DOWNPOUR_PUSH_EVERY)),
                        help="Downpour n_push values (n_fetch = n_push), comma-separated (default 1,4,16)")
    parser.add_argument("--elephas-timeout", type=float, default=1800, help="seconds per Elephas run (default 1800)")
    args = parser.parse_args()
    contenders = {"keras", "horovod", "downpour", "averaging", "elephas"}
    wanted = set(filter(None, args.only.split(","))) - {"ceiling"} or contenders
    if wanted - contenders:
        parser.error(f"--only: unknown contender(s) {', '.join(sorted(wanted - contenders))}; "
                     f"choose from ceiling, {', '.join(sorted(contenders))}")
    try:
        push_every = [int(value) for value in args.push_every.split(",")]
    except ValueError:
        parser.error(f"--push-every: expected comma-separated whole numbers, got {args.push_every!r}")
    if min(push_every) < 1:
        parser.error("--push-every: every value must be ≥ 1")

    os.environ.setdefault("CLOUDBURST_SPARK_UI", "false")
    os.environ.setdefault("CLOUDBURST_SPARK_PROGRESS", "false")  # progress bars would interleave with the table
    from training.config import RunSpec
    from training.console import configure_logging
    from training.jobs.spark_session import spark_session

    configure_logging()
    base = RunSpec(epochs=args.epochs, batch_size_per_worker=args.batch, target_accuracy=args.target,
                   threads_per_worker=1, workers_per_node=2, data_root=str(BENCH_ROOT / "data"), augment_copies=1,
                   train_limit=args.train_limit)
    if args.server_learning_rate:
        base = base.with_changes(server_learning_rate=args.server_learning_rate)
    spark = spark_session("cloudburst-bench-strategies", "local[2]")
    prepare(base, spark)
    train_rows = storage.require_manifest(base.augmented_uri())["splits"]["train"]["rows"]
    print(f"measuring: 2 workers × 1 thread, batch {args.batch} per worker, {args.epochs} epochs over "
          f"{train_rows:,} images, target {args.target:.1%}", flush=True)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {"ceiling (2 × 1 thread)": ceiling(base.with_changes(epochs=2).to_mapping())}
    if "keras" in wanted:
        results["keras, 1 process, 2 thr"] = keras_two_threads(base)
    if "horovod" in wanted:
        results["horovod 1x2"] = train_strategy(base.with_changes(strategy="horovod"), spark, "bench-horovod")
    if "downpour" in wanted:
        for every in push_every:
            spec = base.with_changes(strategy="downpour", n_fetch=every, n_push=every)
            results[f"downpour n_push={every}"] = train_strategy(spec, spark, f"bench-downpour-{every}")
    if "averaging" in wanted:
        results["averaging 1x2"] = train_strategy(base.with_changes(strategy="averaging"), spark, "bench-averaging")
    if "elephas" in wanted:
        from elephas_peer import run_elephas

        for mode, frequency in ELEPHAS_MODES:
            results[f"elephas {mode[:5]}/{frequency}"] = run_elephas(base.to_mapping(), mode, frequency,
                                                                     args.elephas_timeout)
    spark.stop()

    ceiling_rate = results["ceiling (2 × 1 thread)"]["samples_per_second"]
    print(f"\n## Strategies, 2 workers × 1 thread, batch {args.batch} per worker (one run, "
          f"{time.perf_counter() - started:.0f} s)\n")
    print(f"| {'configuration':<24} | samples/s | ceiling | s to {args.target:.1%} | final acc | bytes moved |")
    print(f"|{'-' * 26}|-----------|---------|--------------|-----------|------------|")
    for name, measured in results.items():
        print(row(name, measured, ceiling_rate))
    summarise(results, ceiling_rate, args.target)


def summarise(results: dict[str, dict[str, Any]], ceiling_rate: float, target: float) -> None:
    """The issue's targets, each as a measured ratio."""
    def rate(name: str) -> float:
        return results[name].get("samples_per_second") or median_throughput(results[name]["epochs"])

    def seconds(names: list[str]) -> tuple[str, float] | None:
        reached = [(name, results[name]["time_to_target_seconds"]) for name in names
                   if results[name].get("time_to_target_seconds")]
        return min(reached, key=lambda pair: pair[1]) if reached else None

    downpour = [name for name in results if name.startswith("downpour")]
    ours = [name for name in results if name.split()[0] in ("horovod", "downpour", "averaging")]
    print()
    if downpour:
        best = max(downpour, key=rate)
        print(f"Downpour's best throughput: {best}, {rate(best) / ceiling_rate:.0%} of the ceiling (target ≥ 90 %)")
        if "horovod 1x2" in results:
            gaps = {name: 100 * (results["horovod 1x2"]["final_accuracy"] - results[name]["final_accuracy"])
                    for name in downpour}
            print("final accuracy below Horovod's: " + ", ".join(f"{name} {gap:+.2f} points"
                                                                  for name, gap in gaps.items()) + " (target ≤ 0.3)")
    best_ours = seconds(ours)
    elephas = seconds([name for name in results if name.startswith("elephas")])
    keras = seconds([name for name in results if name.startswith("keras")])
    if best_ours:
        print(f"Cloudburst's fastest to {target:.1%}: {best_ours[0]} in {best_ours[1]:.1f} s")
        if elephas:
            print(f"  vs Elephas' best ({elephas[0]}, {elephas[1]:.1f} s): {elephas[1] / best_ours[1]:.2f}x sooner "
                  f"(target ≥ 1.5x)")
        elif any(name.startswith("elephas") for name in results):
            print(f"  Elephas reached {target:.1%} in no mode")
        if keras:
            print(f"  vs plain Keras on both cores ({keras[1]:.1f} s): {keras[1] / best_ours[1]:.2f}x "
                  f"(target > 1x)")
    else:
        print(f"no Cloudburst strategy reached {target:.1%}")


if __name__ == "__main__":
    main()
