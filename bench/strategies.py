"""Strategies side by side in one run, on the same data (full MNIST, k=1 elastic), 2 workers × 1 thread each.

Contenders, all with the same model, batch size per worker and evaluation schedule (4 per epoch):
  keras, 2 threads       plain Keras in one process on both cores: what a user would run instead
  horovod 1x2            synchronous ring all-reduce every step (Horovod on Spark, Gloo)
  downpour n_push=k      asynchronous Downpour SGD, n_fetch = n_push = k, 2 server shards, Adagrad
  averaging 1x2          MapReduce model averaging, 4 rounds per epoch
  elephas …              Elephas 6.2.1 (installed into a throwaway environment by bench/elephas_peer.py)

Each of our strategies is measured against its own ceiling: the same configuration run by the strategy's own code
with communication off (``communication=False``: the same workers, data path and training loop, nothing sent), so
the ratio is the share of the strategy's throughput that communication leaves. A strategy above its ceiling by more
than CEILING_NOISE_MARGIN (training/study/report.py) means the ceiling measured other work: the benchmark says which
and exits non-zero.

Printed: samples/s (median over epochs after the first), its fraction of the contender's own ceiling, seconds to
the target validation accuracy on each contender's training clock (evaluations excluded), final validation accuracy
and bytes moved between processes (≈: Horovod's ring all-reduce volume computed from steps and model size, not
counted on the wire).
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

from results import key, publish_run, recorded_as, table
from scaling import BENCH_ROOT, measured_from, median_throughput, prepare, train_fresh

from training import storage
from training.study.report import above_ceiling

DOWNPOUR_PUSH_EVERY = (1, 4, 16)
ELEPHAS_MODES = (("synchronous", "epoch"), ("asynchronous", "batch"), ("asynchronous", "epoch"))
# `make bench` runs it too, with the same arguments: one result, named for the dedicated target.
RUNS = {"bench-strategies": ("make bench-strategies", [])}


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
    if spec.strategy == "horovod" and spec.communication:  # ring all-reduce: each worker sends and receives
        # 2·(N−1)/N of the gradients
        workers = spec.total_workers
        steps = result.extra["steps_per_epoch"] * len(result.epochs)
        measured["bytes_moved"] = steps * workers * 2 * 2 * (workers - 1) / workers * model_bytes(spec)
        measured["bytes_estimated"] = True
    return measured


def model_bytes(spec) -> int:
    from training.workload_registry import workload_for

    return sum(weights.nbytes for weights in workload_for(spec).build_model().get_weights())


def with_ceiling(spec, spark, run_name: str, epochs: int) -> dict[str, dict[str, Any]]:
    """The strategy's run and its ceiling: the same configuration with communication off, ``epochs`` long (it only
    measures throughput)."""
    ceiling_spec = spec.with_changes(communication=False, epochs=epochs)
    return {"run": train_strategy(spec, spark, run_name),
            "ceiling": train_strategy(ceiling_spec, spark, f"{run_name}-ceiling")}


def rate(measured: dict[str, Any]) -> float:
    return measured.get("samples_per_second") or median_throughput(measured["epochs"])


def row(name: str, measured: dict[str, Any], ceiling_rate: float | None) -> str:
    """The scaling benchmark's row, against the contender's own ceiling ("–" without one), plus the bytes moved."""
    target = measured.get("time_to_target_seconds")
    accuracy = measured.get("final_accuracy")
    moved = measured.get("bytes_moved")
    moved_text = "–" if moved is None else f"{'≈' if measured.get('bytes_estimated') else ''}{moved / 1e9:,.2f} GB"
    fraction = "–" if ceiling_rate is None else f"{rate(measured) / ceiling_rate:.0%}"
    return (f"| {name:<24} | {rate(measured):>9,.0f} | {fraction:>7} | "
            f"{f'{target:,.1f}' if target else 'not reached':>12} | "
            f"{f'{100 * accuracy:.2f} %' if accuracy is not None else '–':>9} | {moved_text:>10} |")


def table_row(name: str, measured: dict[str, Any], ceiling_rate: float | None, ceiling_of: str = "") -> dict:
    """``row``'s figures as raw values; ``ceiling_of``: the contender whose ceiling this row is ("" for a run)."""
    moved = measured.get("bytes_moved")
    return {"configuration": name, "samples_per_second": rate(measured),
            "of_ceiling": None if ceiling_rate is None else rate(measured) / ceiling_rate,
            "seconds_to_target": measured.get("time_to_target_seconds") or None,
            "final_accuracy": measured.get("final_accuracy"),
            "gigabytes_moved": None if moved is None else moved / 1e9,
            "bytes_counted": None if moved is None else ("computed" if measured.get("bytes_estimated") else "counted"),
            "ceiling_of": ceiling_of}


def result_tables(settings: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[dict, dict]:
    """(values, tables) for docs/results from the printed table's rows (``table_row``; a ceiling row follows its
    contender). values: ``settings`` (batch, epochs, target_accuracy, ceiling_epochs, train_examples, …);
    "contenders": per contender (``key`` of its name: keras_1_process_2_thr, horovod_1x2, downpour_n_push_4,
    averaging_1x2, elephas_synch_epoch, …) its samples_per_second, of_ceiling, seconds_to_target, final_accuracy,
    gigabytes_moved; "ceilings": each strategy contender's ceiling samples/s; and the summary's figures:
    fastest (the name of Cloudburst's fastest to target) with fastest_seconds, speedup_over_elephas (Elephas' best
    seconds over it), speedup_over_keras, downpour_best_of_ceiling, accuracy_below_horovod (points per Downpour
    contender). table: "strategies" (the ceiling rows included, named "↳ ceiling of …")."""
    runs = [row for row in rows if not row["ceiling_of"]]
    fields = ("samples_per_second", "of_ceiling", "seconds_to_target", "final_accuracy", "gigabytes_moved")
    values: dict[str, Any] = {**settings,
                              "contenders": {key(row["configuration"]): {f: row[f] for f in fields} for row in runs},
                              "ceilings": {key(row["ceiling_of"]): row["samples_per_second"]
                                           for row in rows if row["ceiling_of"]}}

    def fastest(prefixes: tuple[str, ...]) -> dict[str, Any] | None:
        reached = [row for row in runs if row["configuration"].startswith(prefixes) and row["seconds_to_target"]]
        return min(reached, key=lambda row: row["seconds_to_target"]) if reached else None

    ours, elephas, keras = fastest(("horovod", "downpour", "averaging")), fastest(("elephas",)), fastest(("keras",))
    values["fastest"] = ours["configuration"] if ours else None
    values["fastest_seconds"] = ours["seconds_to_target"] if ours else None
    values["speedup_over_elephas"] = elephas["seconds_to_target"] / ours["seconds_to_target"] if ours and elephas \
        else None
    values["speedup_over_keras"] = keras["seconds_to_target"] / ours["seconds_to_target"] if ours and keras else None
    downpour = [row for row in runs if row["configuration"].startswith("downpour")]
    values["downpour_best_of_ceiling"] = max((row["of_ceiling"] for row in downpour), default=None)
    horovod = next((row for row in runs if row["configuration"] == "horovod 1x2"), None)
    values["accuracy_below_horovod"] = {key(row["configuration"]): 100 * (horovod["final_accuracy"]
                                                                         - row["final_accuracy"])
                                        for row in downpour} if horovod else {}
    shown = [{**row, "configuration": f"↳ ceiling of {row['ceiling_of']}" if row["ceiling_of"]
              else row["configuration"]} for row in rows]
    columns = [("configuration", "configuration", "text"), ("samples/s", "samples_per_second", "int"),
               ("of its ceiling", "of_ceiling", "pct1"),
               (f"s to {settings['target_accuracy']:.1%}", "seconds_to_target", "s"),
               ("final accuracy", "final_accuracy", "pct"), ("GB moved", "gigabytes_moved", "num"),
               ("bytes", "bytes_counted", "text")]
    return values, {"strategies": table(columns, shown)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=6, help="epochs per contender (default 6)")
    parser.add_argument("--batch", type=int, default=128, help="batch size per worker (default 128)")
    parser.add_argument("--target", type=float, default=0.99, help="target validation accuracy (default 0.99)")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images only (smoke tests)")
    parser.add_argument("--server-learning-rate", type=float, default=None,
                        help="Downpour server learning rate (default: the run specification's)")
    parser.add_argument("--ceiling-epochs", type=int, default=2,
                        help="epochs of each strategy's ceiling run (communication off; default 2: its throughput "
                             "is the median over the epochs after the first)")
    parser.add_argument("--only", default="",
                        help="comma-separated contenders to run: keras, horovod, downpour, averaging, elephas "
                             "(default: all; each strategy's ceiling runs with it)")
    parser.add_argument("--push-every", default=",".join(map(str, DOWNPOUR_PUSH_EVERY)),
                        help="Downpour n_push values (n_fetch = n_push), comma-separated (default 1,4,16)")
    parser.add_argument("--elephas-timeout", type=float, default=1800, help="seconds per Elephas run (default 1800)")
    args = parser.parse_args()
    contenders = {"keras", "horovod", "downpour", "averaging", "elephas"}
    wanted = set(filter(None, args.only.split(","))) - {"ceiling"} or contenders
    if wanted - contenders:
        parser.error(f"--only: unknown contender(s) {', '.join(sorted(wanted - contenders))}; "
                     f"choose from {', '.join(sorted(contenders))}")
    if args.ceiling_epochs < 2:
        parser.error("--ceiling-epochs: at least 2 (the first epoch, which traces the graphs, is not counted)")
    try:
        push_every = [int(value) for value in args.push_every.split(",")]
    except ValueError:
        parser.error(f"--push-every: expected comma-separated whole numbers, got {args.push_every!r}")
    if min(push_every) < 1:
        parser.error("--push-every: every value must be ≥ 1")
    run = recorded_as(parser, args, RUNS)

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
    results: dict[str, dict[str, Any]] = {}
    ceilings: dict[str, dict[str, Any]] = {}  # strategy contender → its own ceiling

    def contend(name: str, spec, run_name: str) -> None:
        measured = with_ceiling(spec, spark, run_name, args.ceiling_epochs)
        results[name], ceilings[name] = measured["run"], measured["ceiling"]

    if "keras" in wanted:
        results["keras, 1 process, 2 thr"] = keras_two_threads(base)
    if "horovod" in wanted:
        contend("horovod 1x2", base.with_changes(strategy="horovod"), "bench-horovod")
    if "downpour" in wanted:
        for every in push_every:
            contend(f"downpour n_push={every}", base.with_changes(strategy="downpour", n_fetch=every, n_push=every),
                    f"bench-downpour-{every}")
    if "averaging" in wanted:
        contend("averaging 1x2", base.with_changes(strategy="averaging"), "bench-averaging")
    if "elephas" in wanted:
        from elephas_peer import run_elephas

        for mode, frequency in ELEPHAS_MODES:
            results[f"elephas {mode[:5]}/{frequency}"] = run_elephas(base.to_mapping(), mode, frequency,
                                                                     args.elephas_timeout)
    spark.stop()

    elapsed = time.perf_counter() - started
    print(f"\n## Strategies, 2 workers × 1 thread, batch {args.batch} per worker (one run, "
          f"{elapsed:.0f} s)\n")
    print("ceiling: the fraction of the contender's own ceiling, its code with communication off "
          f"({args.ceiling_epochs} epochs; the ceiling rows are those runs)\n")
    print(f"| {'configuration':<24} | samples/s | ceiling | s to {args.target:.1%} | final acc | bytes moved |")
    print(f"|{'-' * 26}|-----------|---------|--------------|-----------|------------|")
    ceiling_rates = {name: rate(ceiling) for name, ceiling in ceilings.items()}
    rows = []
    for name, measured in results.items():
        print(row(name, measured, ceiling_rates.get(name)))
        rows.append(table_row(name, measured, ceiling_rates.get(name)))
        if name in ceilings:
            print(row("  ↳ its ceiling", ceilings[name], ceiling_rates[name]))
            rows.append(table_row("  ↳ its ceiling", ceilings[name], ceiling_rates[name], ceiling_of=name))
    ratios = {name: rate(results[name]) / ceiling_rates[name] for name in ceilings}
    summarise(results, ratios, args.target)
    settings = {"batch": args.batch, "epochs": args.epochs, "target_accuracy": args.target,
                "ceiling_epochs": args.ceiling_epochs, "train_examples": train_rows, "seconds": elapsed}
    problem = above_ceiling(ratios)
    if problem:  # the ceiling measured other work: nothing is recorded
        sys.exit(problem)
    publish_run(run, *result_tables(settings, rows))


def summarise(results: dict[str, dict[str, Any]], ratios: dict[str, float], target: float) -> None:
    """The issue's targets, each as a measured ratio; ``ratios``: each strategy's fraction of its own ceiling."""
    def seconds(names: list[str]) -> tuple[str, float] | None:
        reached = [(name, results[name]["time_to_target_seconds"]) for name in names
                   if results[name].get("time_to_target_seconds")]
        return min(reached, key=lambda pair: pair[1]) if reached else None

    downpour = [name for name in results if name.startswith("downpour")]
    ours = [name for name in results if name.split()[0] in ("horovod", "downpour", "averaging")]
    print()
    if ratios:
        print("of its own ceiling: " + ", ".join(f"{name} {ratio:.1%}" for name, ratio in ratios.items()))
    if downpour:
        best = max(downpour, key=lambda name: ratios[name])
        print(f"Downpour's best fraction of its ceiling: {best}, {ratios[best]:.0%} (target ≥ 90 %)")
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
