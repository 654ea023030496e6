"""The communication cost model (training/study/cost_model.py) fitted to a cluster bench's measurements
(bench/cluster_links.py's JSON, the newest under var/bench/cluster/ by default): the fitted constants, then each
configuration predicted by the model fitted to all the others (leave one out), and the median error.

Compute per example is each strategy's own ceiling's rate per host (its workers on all hosts at once, communication
off); a bench from before 2026-12-05 has one plain Keras ceiling, used for every strategy. The link latency is the
measured TCP connect time between hosts (about 50 µs, `make cluster-status`).

Then the model fitted to all of them extrapolates to 8, 16 and 64 nodes at 1, 10 and 25 Gbit/s (a table and
var/bench/cluster/extrapolation.png), with Downpour's server on a node whose link is like the others' (on the
namespace cluster the driver's side is not shaped). That part is model output, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from results import key, publish_run, recorded_as, table

from training import REPO_ROOT
from training.evaluation.figures import close
from training.study.cost_model import Configuration, fit, leave_one_out, median_error
from training.study.study_model import EXTRAPOLATED_LINKS, EXTRAPOLATED_NODES, extrapolate, extrapolation_figure

LINK_BYTES_PER_SECOND = {"10gbit": 1.25e9, "1gbit": 1.25e8, "100mbit": 1.25e7}
# No make target runs it: its own defaults (the newest cluster bench) are the recorded run.
RUNS = {"bench-cost-model-fit": (".venv/training/bin/python bench/cost_model_fit.py", [])}


def configuration(name: str, link: str, settings: dict, parameters: int, steps_per_epoch: int) -> Configuration:
    common = {"workers": settings["nodes"], "parameters": parameters, "batch_per_worker": settings["batch"],
              "link_bytes_per_second": LINK_BYTES_PER_SECOND[link], "steps_per_epoch": steps_per_epoch,
              "latency_seconds": 5e-5}
    if name.startswith("downpour"):
        pushes = int(name.split("=")[1])
        return Configuration("downpour", n_push=pushes, n_fetch=pushes, **common)
    return Configuration(name.split()[0], **common)


def result_tables(fitted_to: str, overlap: dict[str, float], message_seconds: dict[str, float],
                  predictions: list[dict[str, Any]], median: float,
                  extrapolation: dict[str, list[tuple[int, str, float, float]]]) -> tuple[dict, dict]:
    """(values, tables) for docs/results. values: fitted_to (the cluster bench's file), overlap and
    message_seconds per strategy, median_error, errors per configuration (``key`` of "LINK NAME": 10gbit_horovod_3x1),
    and extrapolated speedups per strategy (``key``: horovod, downpour_n_push_4, …) per "NODES_LINK" (8_1_gbit_s):
    model output, not measurements. tables: "predictions" (leave one out) and "extrapolation", as printed."""
    columns = [(f"{nodes} nodes, {link}", key(f"{nodes} {link}"), "x")
               for nodes, link, _, _ in next(iter(extrapolation.values()), [])]
    extrapolated = [{"strategy": name, **{key(f"{nodes} {link}"): speed for nodes, link, _, speed in rows}}
                    for name, rows in extrapolation.items()]
    values = {"fitted_to": fitted_to, "overlap": dict(overlap), "message_seconds": dict(message_seconds),
              "median_error": median,
              "errors": {key(row["configuration"]): row["error"] for row in predictions},
              "extrapolated_speedup": {key(row["strategy"]): {field: speed for field, speed in row.items()
                                                              if field != "strategy"} for row in extrapolated}}
    tables = {"predictions": table([("configuration", "configuration", "text"),
                                    ("measured samples/s", "measured", "int"),
                                    ("predicted (left out)", "predicted", "int"), ("error", "error", "pct1")],
                                   predictions),
              "extrapolation": table([("strategy", "strategy", "text"), *columns], extrapolated)}
    return values, tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    newest = max((REPO_ROOT / "var" / "bench" / "cluster").glob("*.json"), default=None,
                 key=lambda path: path.stat().st_mtime)
    parser.add_argument("--results", type=Path, default=newest, help="a bench/cluster_links.py JSON (default: newest)")
    parser.add_argument("--parameters", type=int, default=225_034, help="the model's parameters (MNIST CNN)")
    args = parser.parse_args()
    recorded = recorded_as(parser, args, RUNS)
    if args.results is None or not args.results.is_file():
        parser.error("no cluster bench results: run `make bench-cluster` first, or give --results")
    results = json.loads(args.results.read_text())
    settings = results["settings"]
    examples = 120_000 if not settings.get("train_limit") else 2 * settings["train_limit"]  # one elastic copy
    steps_per_epoch = examples // settings["nodes"] // settings["batch"]
    observations, labels = [], []
    for link, measured in results["links"].items():
        for name, run in measured["runs"].items():
            observations.append((configuration(name, link, settings, args.parameters, steps_per_epoch),
                                 run["samples_per_second"]))
            labels.append(f"{link} {name}")
    seconds_per_example, by_strategy = compute_per_example(results)
    fitted = fit(observations, seconds_per_example, by_strategy)
    print(f"fitted to all {len(observations)} (links at their nominal rates): overlap "
          + ", ".join(f"{s} {v:.2f}" for s, v in fitted.overlap.items()) + "; cost per message "
          + ", ".join(f"{s} {1000 * v:.1f} ms" for s, v in fitted.message_seconds.items()))
    print("\n| configuration | measured samples/s | predicted (left out) | error |\n|---|---|---|---|")
    predictions = leave_one_out(observations, seconds_per_example, by_strategy)
    prediction_rows = [{"configuration": label, "measured": prediction.measured, "predicted": prediction.predicted,
                        "error": prediction.relative_error}
                       for label, prediction in zip(labels, predictions, strict=True)]
    for label, prediction in zip(labels, predictions, strict=True):
        if prediction.predicted is None or prediction.relative_error is None:
            print(f"| {label} | {prediction.measured:,.0f} | not predicted (no other run of its strategy) | |")
        else:
            print(f"| {label} | {prediction.measured:,.0f} | {prediction.predicted:,.0f} | "
                  f"{prediction.relative_error:.1%} |")
    print(f"\nmedian leave-one-out error: {median_error(predictions):.1%} (target ≤ 15 %)")
    kinds = {"horovod": Configuration("horovod", **_shape(settings, args.parameters, steps_per_epoch)),
             "downpour n_push=4": Configuration("downpour", n_push=4, n_fetch=4,
                                                **_shape(settings, args.parameters, steps_per_epoch)),
             "downpour n_push=16": Configuration("downpour", n_push=16, n_fetch=16,
                                                 **_shape(settings, args.parameters, steps_per_epoch)),
             "averaging": Configuration("averaging", **_shape(settings, args.parameters, steps_per_epoch))}
    # Only strategies the bench ran (--strategies): another has no fitted constants and no ceiling of its own.
    measured = {run.strategy for run, _ in observations}
    table = {name: extrapolate(kind, fitted, examples // settings["batch"]) for name, kind in kinds.items()
             if kind.strategy in measured}
    print("\n**Model output, not measured**: speedup over one worker that does not communicate (samples/s)\n")
    print("| strategy | " + " | ".join(f"{n} nodes, {link}" for n in EXTRAPOLATED_NODES
                                       for link in EXTRAPOLATED_LINKS) + " |")
    print("|---" * (1 + len(EXTRAPOLATED_NODES) * len(EXTRAPOLATED_LINKS)) + "|")
    for name, rows in table.items():
        print(f"| {name} | " + " | ".join(f"{speed:.1f}× ({rate:,.0f})" for _, _, rate, speed in rows) + " |")
    figure_path = args.results.parent / "extrapolation.png"
    figure = extrapolation_figure({name: [(nodes, link, speed) for nodes, link, _, speed in rows]
                                   for name, rows in table.items()},
                                  "Cost model fitted to the cluster bench, extrapolated")
    figure.savefig(figure_path, dpi=100)
    close(figure)
    print(f"\nfigure: {figure_path}")
    publish_run(recorded, *result_tables(args.results.name, fitted.overlap, fitted.message_seconds, prediction_rows,
                                    median_error(predictions), table))


def compute_per_example(results: dict) -> tuple[dict[int, float], dict[tuple[str, int], float]]:
    """Seconds one worker (1 thread) computes per example: each strategy's from its own ceiling, and their mean
    for a strategy without one; a bench from before 2026-12-05 has a single plain Keras ceiling."""
    nodes = results["settings"]["nodes"]
    if "ceilings" in results:
        by_strategy = {(strategy, 1): nodes / run["samples_per_second"]
                       for strategy, run in results["ceilings"].items()}
        return {1: statistics.mean(by_strategy.values())}, by_strategy
    return {1: nodes / results["ceiling"]["samples_per_second"]}, {}


def _shape(settings: dict, parameters: int, steps_per_epoch: int) -> dict:
    return {"workers": settings["nodes"], "parameters": parameters, "batch_per_worker": settings["batch"],
            "link_bytes_per_second": 1.25e9, "steps_per_epoch": steps_per_epoch, "latency_seconds": 5e-5}


if __name__ == "__main__":
    main()
