"""Training scaling on this machine, measured side by side in one run on the same data: full MNIST with k=1 elastic
copy, or (--workload kws_densenet_bilstm) the synthetic Speech Commands corpus of `make demo-kws`, or
(--workload speaker_verification --embedding-model model_a|model_b) one speaker-embedding model of `make demo-sv`
as the speaker classifier it is trained as (the target is speaker accuracy on held-out clips of the training
speakers; a second table times each contender to a development EER, measured after every epoch).

Contenders, all with the same model, batch size per process and evaluation schedule:
  horovod 1x1        Horovod on Spark, 1 worker × 1 thread (the speedup baseline)
  horovod 1x2        Horovod on Spark, 2 workers × 1 thread each
  keras 2 threads    plain Keras in one process using both cores: what a user would run instead
  ceiling            2 independent 1-thread processes, no communication at all: the most 2 workers can get here

Printed: samples/s (median over epochs after the first, whose graph tracing is not training), its fraction of the
ceiling, seconds to the target validation accuracy on the training clock (evaluations excluded; 4 evaluations
per epoch), and final validation accuracy (the test split is not read). Then a throughput sweep of the communication
knobs (batch size, fp16 gradient compression, local gradient accumulation) for Horovod 1x2 against the ceiling at
the same batch size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from results import key, publish_run, recorded_as, table

from training import REPO_ROOT

BENCH_ROOT = REPO_ROOT / "var" / "bench"
# The bench trains with each workload's defaults (training/workloads/<name>/); MNIST one epoch longer, as the
# README's table was measured.
BENCH_OVERRIDES: dict[str, dict[str, Any]] = {"mnist_elastic_cnn": {"epochs": 6}}
# The make targets' runs (bench/results.py records only these): result name → make command, arguments.
RUNS = {"bench-scaling": ("make bench", []),
        "bench-kws": ("make bench-kws", ["--workload", "kws_densenet_bilstm"]),
        **{f"bench-sv-scaling-{model}": ("make bench-sv-scaling", ["--workload", "speaker_verification",
                                                                   "--embedding-model", model, "--target", "0.6"])
           for model in ("model_a", "model_b")}}


def median_throughput(epochs: list[dict[str, float]]) -> float:
    steady = epochs[1:] or epochs
    return statistics.median(row["samples_per_second"] for row in steady)


def single_process(spec_mapping: dict[str, Any], threads: int, rank: int, workers: int) -> dict[str, Any]:
    """Plain Keras, no distribution: one process, ``threads`` intra-op threads, shard ``rank`` of ``workers``."""
    import numpy as np
    import tensorflow as tf

    from training.config import RunSpec
    from training.models.optimizers import make_optimizer
    from training.strategies.base import EvaluationSet
    from training.strategies.evaluation_clock import EvaluationClock
    from training.strategies.input_pipeline import training_dataset
    from training.strategies.placement import configure_tensorflow_threads
    from training.workload_registry import workload_for

    spec = RunSpec.from_mapping(spec_mapping)
    configure_tensorflow_threads(threads)
    tf.keras.utils.set_random_seed(spec.seed)
    tf.get_logger().setLevel("ERROR")
    workload = workload_for(spec)
    images, labels = workload.load_shard(spec.shards_uri(), rank, workers)
    validation_images, validation_labels = EvaluationSet(spec.augmented_uri()).load(workload)
    steps_per_epoch = len(labels) // spec.batch_size_per_worker
    model = workload.build_model()
    model.compile(optimizer=make_optimizer(spec.worker_optimizer, spec.learning_rate), loss=workload.make_loss(),
                  metrics=["accuracy"])
    clock = EvaluationClock(validation_images, validation_labels, spec.evaluations_per_epoch, steps_per_epoch,
                            spec.target_accuracy, combine=lambda counts: counts)
    epochs: list[dict[str, float]] = []

    class Recorder(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            workload.start_epoch(epoch)  # as every strategy does (the speaker models' margin ramp)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            seconds = float(logs["epoch_seconds"])
            epochs.append({"epoch": epoch + 1, "val_accuracy": float(logs["val_accuracy"]), "epoch_seconds": seconds,
                           "samples_per_second": steps_per_epoch * spec.batch_size_per_worker / seconds})
            measuring_started = time.perf_counter()
            epochs[-1].update(workload.measure_epoch(self.model))  # speaker verification: dev_eer, as the strategies
            clock.evaluation_seconds += time.perf_counter() - measuring_started  # off the training clock

    # The workload's online augmentation too (keyword spotting): the same input pipeline as every strategy.
    dataset = training_dataset(images, labels, spec.batch_size_per_worker, spec.seed, augment=workload.augment_batch,
                               augment_seed=(spec.seed, rank))
    model.fit(dataset, epochs=spec.epochs,
              steps_per_epoch=steps_per_epoch, callbacks=[clock, Recorder()], verbose=0)
    return {"epochs": epochs, "evaluations": clock.evaluations, "time_to_target_seconds": clock.time_to_target_seconds,
            "final_accuracy": float(np.asarray(epochs[-1]["val_accuracy"]))}


def single_process_children(spec_mapping: dict[str, Any], threads: int, ranks: tuple[int, ...],
                            workers: int) -> list[dict[str, Any]]:
    """``single_process`` in fresh child processes (all at once): their TensorFlow thread settings are their own,
    whatever this process already initialised."""
    command = [sys.executable, __file__, "--single-process", json.dumps(spec_mapping), "--threads", str(threads),
               "--workers", str(workers)]
    processes = [subprocess.Popen([*command, "--rank", str(rank)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}) for rank in ranks]
    return [json.loads(process.communicate()[0].strip().splitlines()[-1]) for process in processes]


def ceiling(spec_mapping: dict[str, Any]) -> dict[str, Any]:
    """Two 1-thread processes at once, each on its own half of the data, never talking: summed samples/s."""
    outputs = single_process_children(spec_mapping, 1, (0, 1), 2)
    return {"samples_per_second": sum(median_throughput(output["epochs"]) for output in outputs), "runs": outputs}


def prepare(spec, spark) -> None:
    """The workload's own data steps (ingest, augment or features) as the pipeline runs them, then 1 and 2 shards."""
    import importlib

    from training.contract import AUGMENT, FEATURES, INGEST, SPARK_STEPS
    from training.jobs.shard import shard_dataset

    for step in spec.definition.steps:
        if step in (INGEST, AUGMENT, FEATURES):
            run_step = importlib.import_module(spec.definition.job_module(step)).run_step
            run_step(spec, master="local[2]") if step in SPARK_STEPS else run_step(spec)
    for workers in (1, 2):
        shards = spec.with_changes(workers_per_node=workers).shards_uri()
        shard_dataset(spark, spec.augmented_uri(), shards, workers, spec.seed)


def train_fresh(spec, spark, run_name: str):
    """Train ``spec`` with its strategy under ``run_name`` from scratch (never a resume); returns the result."""
    import shutil

    from training import storage
    from training.strategies import get_strategy
    from training.strategies.base import EvaluationSet

    spec = spec.with_changes(run_name=run_name)
    shutil.rmtree(storage.resolve(spec.run_uri()).path, ignore_errors=True)
    return get_strategy(spec.strategy).train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()),
                                             spec.run_uri(), spark)


def measured_from(result) -> dict[str, Any]:
    """What the tables print, from a strategy's result."""
    return {"epochs": result.epochs, "time_to_target_seconds": result.time_to_target_seconds,
            "final_accuracy": result.epochs[-1]["val_accuracy"], "wall_seconds": result.wall_seconds}


def horovod(spec, spark, run_name: str) -> dict[str, Any]:
    return measured_from(train_fresh(spec.with_changes(strategy="horovod"), spark, run_name))


def seconds_to_eer(epochs: list[dict[str, float]], target_eer: float) -> float | None:
    """Training seconds (evaluations excluded) until the first epoch end whose development EER is ≤ target."""
    clock = 0.0
    for epoch in epochs:
        clock += epoch["epoch_seconds"]
        if epoch.get("dev_eer") is not None and epoch["dev_eer"] <= target_eer:
            return clock
    return None


def eer_table(results: dict[str, dict[str, Any]], target_eer: float | None) -> tuple[float | None, list[dict]]:
    """Time to a development EER for the contenders that train to the end (the ceiling only measures throughput):
    by default the highest final EER among them, so that each reaches it and the clocks compare. Returns the
    target and the printed rows (no target, no rows: not a speaker workload)."""
    trained = {name: measured for name, measured in results.items()
               if measured["epochs"][-1].get("dev_eer") is not None}
    if not trained:
        return None, []
    target = target_eer if target_eer is not None else max(m["epochs"][-1]["dev_eer"] for m in trained.values())
    print(f"\n### Time to a development EER of {100 * target:.2f} % (sv_dev trials, raw cosine; "
          f"{'--target-eer' if target_eer is not None else 'the highest final EER of the three'})\n")
    print(f"| {'configuration':<24} | s to EER | epoch | final dev EER |")
    print(f"|{'-' * 26}|----------|-------|---------------|")
    rows = []
    for name, measured in trained.items():
        seconds = seconds_to_eer(measured["epochs"], target)
        epoch = next((row["epoch"] for row in measured["epochs"] if row["dev_eer"] <= target), None)
        rows.append({"configuration": name, "seconds_to_eer": seconds, "epoch": epoch,
                     "final_dev_eer": measured["epochs"][-1]["dev_eer"]})
        print(f"| {name:<24} | {f'{seconds:,.1f}' if seconds else 'not reached':>8} | "
              f"{epoch if epoch else '–':>5} | {100 * measured['epochs'][-1]['dev_eer']:12.2f} % |")
    one, two = (seconds_to_eer(results[name]["epochs"], target) for name in ("horovod 1x1", "horovod 1x2"))
    if one and two:
        print(f"\ntime-to-EER: 1x2 is {one / two:.2f}x faster than 1x1")
    return target, rows


def row(name: str, measured: dict[str, Any], ceiling_rate: float) -> str:
    rate = measured.get("samples_per_second") or median_throughput(measured["epochs"])
    target = measured.get("time_to_target_seconds")
    accuracy = measured.get("final_accuracy")
    return (f"| {name:<24} | {rate:>9,.0f} | {rate / ceiling_rate:>7.0%} | "
            f"{f'{target:,.1f}' if target else 'not reached':>12} | "
            f"{f'{100 * accuracy:.2f} %' if accuracy is not None else '–':>9} |")


def scaling_row(name: str, measured: dict[str, Any], ceiling_rate: float) -> dict[str, Any]:
    """The scaling table's row as raw values (what ``row`` prints)."""
    rate = measured.get("samples_per_second") or median_throughput(measured["epochs"])
    return {"configuration": name, "samples_per_second": rate, "of_ceiling": rate / ceiling_rate,
            "seconds_to_target": measured.get("time_to_target_seconds") or None,
            "final_accuracy": measured.get("final_accuracy")}


def sweep_row(batch: int, fp16: bool, passes: int, rate: float, ceiling_rate: float) -> dict[str, Any]:
    """The knob sweep's row as raw values."""
    return {"batch": batch, "fp16": "yes" if fp16 else "no", "passes": passes, "samples_per_second": rate,
            "ceiling_samples_per_second": ceiling_rate, "of_ceiling": rate / ceiling_rate}


def result_tables(settings: dict[str, Any], rows: list[dict[str, Any]], target_eer: float | None = None,
                  eer_rows: list[dict[str, Any]] | None = None,
                  sweep_rows: list[dict[str, Any]] | None = None) -> tuple[dict, dict]:
    """(values, tables) for docs/results from the printed tables' rows (``scaling_row``; ``eer_table``'s; the knob
    sweep's). values: ``settings`` (workload, batch, epochs, target_accuracy, train_examples, …), per contender
    (``key`` of its name: horovod_1x1, horovod_1x2, keras_1_process_2_thr, ceiling_2_1_thread) its samples/s,
    fraction of the ceiling, seconds to target and final accuracy, and the headline ratios: speedup_to_target
    (1x1's seconds over 1x2's), of_ceiling_1x2, throughput_1x2_over_1x1; with the EER table, target_eer,
    seconds_to_eer per contender and speedup_to_eer. tables: "scaling", "eer" and "sweep" where printed."""
    by_key = {key(row["configuration"]): row for row in rows}
    one, two = by_key["horovod_1x1"], by_key["horovod_1x2"]
    values: dict[str, Any] = {**settings, "contenders": {
        name: {field: row[field] for field in ("samples_per_second", "of_ceiling", "seconds_to_target",
                                               "final_accuracy")} for name, row in by_key.items()}}
    values["speedup_to_target"] = (one["seconds_to_target"] / two["seconds_to_target"]
                                   if one["seconds_to_target"] and two["seconds_to_target"] else None)
    values["of_ceiling_1x2"] = two["of_ceiling"]
    values["throughput_1x2_over_1x1"] = two["samples_per_second"] / one["samples_per_second"]
    tables = {"scaling": table(
        [("configuration", "configuration", "text"), ("samples/s", "samples_per_second", "int"),
         ("of the ceiling", "of_ceiling", "pct1"),
         (f"s to {settings['target_accuracy']:.1%}", "seconds_to_target", "s"),
         ("final accuracy", "final_accuracy", "pct")], rows)}
    if eer_rows:
        eer_by_key = {key(row["configuration"]): row for row in eer_rows}
        values["target_eer"] = target_eer
        values["seconds_to_eer"] = {name: row["seconds_to_eer"] for name, row in eer_by_key.items()}
        first, second = (eer_by_key.get(name, {}).get("seconds_to_eer") for name in ("horovod_1x1", "horovod_1x2"))
        values["speedup_to_eer"] = first / second if first and second else None
        tables["eer"] = table([("configuration", "configuration", "text"), ("s to EER", "seconds_to_eer", "s"),
                               ("epoch", "epoch", "int"), ("final dev EER", "final_dev_eer", "pct")], eer_rows)
    if sweep_rows:
        tables["sweep"] = table(
            [("batch/worker", "batch", "int"), ("fp16", "fp16", "text"), ("backward passes/step", "passes", "int"),
             ("samples/s", "samples_per_second", "int"), ("ceiling at that batch", "ceiling_samples_per_second", "int"),
             ("fraction", "of_ceiling", "pct1")], sweep_rows)
    return values, tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from training import workload_registry as workloads

    parser.add_argument("--workload", default="mnist_elastic_cnn", choices=workloads.names(),
                        help="what to train (default mnist_elastic_cnn; kws_densenet_bilstm skips the knob sweep)")
    parser.add_argument("--embedding-model", default="model_a", choices=("model_a", "model_b"),
                        help="speaker_verification only: which embedding model (default model_a)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs for the time-to-target runs (MNIST 6, KWS 12)")
    parser.add_argument("--batch", type=int, default=None, help="batch size per process (MNIST 128, KWS 64)")
    parser.add_argument("--target", type=float, default=None, help="target validation accuracy (MNIST 0.99, KWS 0.9)")
    parser.add_argument("--target-eer", type=float, default=None,
                        help="speaker_verification: the development EER the time-to-EER table measures to (default: "
                             "the highest final EER of 1x1, 1x2 and plain Keras, which each reached)")
    parser.add_argument("--sweep-epochs", type=int, default=2, help="epochs per knob-sweep run (default 2)")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images only (smoke tests)")
    parser.add_argument("--single-process", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single_process:  # a child of this benchmark: one plain Keras process, result as JSON on stdout
        print(json.dumps(single_process(json.loads(args.single_process), args.threads, args.rank, args.workers)))
        return
    run = recorded_as(parser, args, RUNS)

    os.environ.setdefault("CLOUDBURST_SPARK_UI", "false")
    os.environ.setdefault("CLOUDBURST_SPARK_PROGRESS", "false")  # progress bars would interleave with the tables
    from training.config import RunSpec
    from training.console import configure_logging
    from training.jobs.spark_session import spark_session

    configure_logging()
    from training.config import workload_defaults

    defaults = {**workload_defaults(args.workload), **BENCH_OVERRIDES.get(args.workload, {})}
    args.epochs = args.epochs or defaults["epochs"]
    args.batch = args.batch or defaults["batch_size_per_worker"]
    args.target = args.target or defaults["target_accuracy"]
    base = RunSpec.from_mapping({"workload": args.workload, "epochs": args.epochs,
                                 "batch_size_per_worker": args.batch, "target_accuracy": args.target,
                                 "threads_per_worker": 1, "data_root": str(BENCH_ROOT / "data"),
                                 **({"train_limit": args.train_limit} if args.train_limit else {})})
    if base.definition.branches:  # speaker verification: one embedding model with its own features
        base = base.for_branch(args.embedding_model)
    spark = spark_session("cloudburst-bench-scaling", "local[2]")
    prepare(base, spark)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    from training import storage

    train_rows = storage.require_manifest(base.augmented_uri())["splits"]["train"]["rows"]
    what = f"{args.workload} {base.branch}".strip()
    print(f"measuring {what}: batch {args.batch} per process, {args.epochs} epochs over {train_rows:,} "
          f"examples, target {args.target:.1%}", flush=True)
    results["ceiling (2 × 1 thread)"] = ceiling(base.with_changes(workers_per_node=2, epochs=2).to_mapping())
    results["horovod 1x1"] = horovod(base.with_changes(workers_per_node=1), spark, "bench-1x1")
    results["horovod 1x2"] = horovod(base.with_changes(workers_per_node=2), spark, "bench-1x2")
    [results["keras, 1 process, 2 thr"]] = single_process_children(
        base.with_changes(workers_per_node=1).to_mapping(), 2, (0,), 1)
    ceiling_rate = results["ceiling (2 × 1 thread)"]["samples_per_second"]

    elapsed = time.perf_counter() - started
    print(f"\n## Scaling, batch {args.batch} per process (measured in one run, {elapsed:.0f} s)\n")
    print(f"| {'configuration':<24} | samples/s | ceiling | s to {args.target:.1%} | final acc |")
    print(f"|{'-' * 26}|-----------|---------|--------------|-----------|")
    for name, measured in results.items():
        print(row(name, measured, ceiling_rate))
    one, two = results["horovod 1x1"], results["horovod 1x2"]
    if one["time_to_target_seconds"] and two["time_to_target_seconds"]:
        ratio = one["time_to_target_seconds"] / two["time_to_target_seconds"]
        print(f"\ntime-to-{args.target:.1%}: 1x2 is {ratio:.2f}x faster than 1x1 (target ≥ 1.5x)")
    print(f"throughput: 1x2 reaches {median_throughput(two['epochs']) / ceiling_rate:.0%} of the ceiling "
          f"(target ≥ 90 %); 1x2 over 1x1: {median_throughput(two['epochs']) / median_throughput(one['epochs']):.2f}x")
    target_eer, eer_rows = eer_table({name: results[name] for name in ("horovod 1x1", "horovod 1x2",
                                                                       "keras, 1 process, 2 thr")}, args.target_eer)
    settings = {"workload": args.workload, "branch": base.branch or None, "batch": args.batch, "epochs": args.epochs,
                "target_accuracy": args.target, "train_examples": train_rows, "seconds": elapsed}
    rows = [scaling_row(name, measured, ceiling_rate) for name, measured in results.items()]
    sweep_rows: list[dict[str, Any]] = []

    if args.skip_sweep or args.workload != "mnist_elastic_cnn":
        spark.stop()
        publish_run(run, *result_tables(settings, rows, target_eer, eer_rows))
        return
    print(f"\n## Communication knobs, Horovod 1x2 throughput ({args.sweep_epochs} epochs each)\n")
    print("| batch/worker | fp16 | backward passes/step | samples/s | ceiling at that batch | fraction |")
    print("|---|---|---|---|---|---|")
    sweep = [(64, False, 1), (128, False, 1), (256, False, 1), (128, True, 1), (128, False, 4), (256, True, 4)]
    ceilings: dict[int, float] = {args.batch: ceiling_rate}
    for batch, fp16, passes in sweep:
        spec = base.with_changes(workers_per_node=2).with_changes(epochs=args.sweep_epochs, batch_size_per_worker=batch,
                                                    fp16_compression=fp16, backward_passes_per_step=passes)
        if batch not in ceilings:
            ceilings[batch] = ceiling(spec.with_changes(epochs=2).to_mapping())["samples_per_second"]
        rate = median_throughput(horovod(spec, spark, f"bench-sweep-{batch}-{fp16}-{passes}")["epochs"])
        sweep_rows.append(sweep_row(batch, fp16, passes, rate, ceilings[batch]))
        print(f"| {batch} | {'yes' if fp16 else 'no'} | {passes} | {rate:,.0f} | {ceilings[batch]:,.0f} | "
              f"{rate / ceilings[batch]:.0%} |", flush=True)
    spark.stop()
    publish_run(run, *result_tables(settings, rows, target_eer, eer_rows, sweep_rows))


if __name__ == "__main__":
    main()
