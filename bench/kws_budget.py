"""Distinct data or more passes? The keyword spotter's two ways to spend one training budget, side by side.

The spotter underfits at the demo's budget (training accuracy ends near 90 %). Before choosing a bigger preset,
this measures what the model lacks, in one run:

- **passes**: the demo's corpus (``--speakers``) and ``--factor`` times the epochs;
- **data**: ``--factor`` times the speakers (so that many times the distinct utterances and voices), the epochs.

Both see about the same number of training examples (the same steps), with the same schedule (Adam, the
workload's learning rate, one warm-up epoch, cosine decay to 0 at the end) and online augmentation. They train at
the same time, each pinned to one of the machine's cores (``taskset``, ``local[1]``, one TensorFlow thread), so
neither is measured beside an idle core the other lacks. The data steps (synthesis, features, shards) run first,
one after the other, on every core: they are cheap next to training and are reported apart.

Every step is the `cloudburst` command a user runs; figures come back from the MLflow runs: validation accuracy
against the training clock (evaluations excluded) and against examples seen, training accuracy per epoch, and at
the end test accuracy (read once) with the open-set and closed-set false-accept rates. The curves are drawn to
``curves.png`` beside the results (and to docs/img when recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kws_generalisation import CLI, cloudburst, tracked_run
from results import REPO_ROOT, publish_run, recorded_as
from results import table as result_table

BENCH_ROOT = REPO_ROOT / "var" / "bench" / "kws-budget"
FIGURE = REPO_ROOT / "docs" / "img" / "bench-kws-budget.png"
RUNS = {"bench-kws-budget": ("make bench-kws-budget", [])}
POLL_SECONDS = 2.0
TRAIN_TIMEOUT_SECONDS = 3 * 3600  # a bound on the arms' training; the default run's took 34 min (2026-12-06)


def arms(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each arm's settings: the same examples seen, spent on passes or on distinct utterances."""
    return {"passes": {"speakers": args.speakers, "epochs": args.epochs * args.factor,
                       "evaluations_per_epoch": 1},
            # Half as many evaluations as the same examples in the passes arm: its validation split is larger.
            "data": {"speakers": args.speakers * args.factor, "epochs": args.epochs,
                     "evaluations_per_epoch": max(1, args.factor // 2)}}


def train_side_by_side(specs: dict[str, Any]) -> dict[str, float]:
    """Train every arm at once, arm i pinned to core i; wall seconds per arm. A failed or overdue arm stops the
    bench, and no other arm is left training behind it."""
    started = time.perf_counter()
    processes = {}
    walls = {}
    try:
        for core, (name, spec) in enumerate(specs.items()):
            with (BENCH_ROOT / f"train-{name}.log").open("w") as log:  # the child holds its own copy
                processes[name] = subprocess.Popen(["taskset", "-c", str(core), CLI, "train", *spec.to_args()],
                                                   stdout=log, stderr=subprocess.STDOUT, text=True,
                                                   env={**os.environ, "CLOUDBURST_SPARK_PROGRESS": "false"})
        while len(walls) < len(processes):  # every few seconds: a failed arm is reported at once, not after the others
            for name, process in processes.items():
                if name in walls or process.poll() is None:
                    continue
                if process.returncode != 0:
                    raise SystemExit(f"arm {name}: cloudburst train failed ({process.returncode}); see "
                                     f"{BENCH_ROOT / f'train-{name}.log'}")
                walls[name] = time.perf_counter() - started
                print(f"  {name}: trained in {walls[name] / 60:.1f} min", flush=True)
            if time.perf_counter() - started > TRAIN_TIMEOUT_SECONDS:
                raise SystemExit(f"the arms trained past {TRAIN_TIMEOUT_SECONDS} s; see {BENCH_ROOT}/train-*.log")
            time.sleep(POLL_SECONDS)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
    return walls


def run_record(spec: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """(metrics, training_result.json) of the arm's MLflow run."""
    import mlflow

    run = tracked_run(spec)
    with tempfile.TemporaryDirectory() as directory:
        path = mlflow.MlflowClient(spec.tracking_uri).download_artifacts(run.info.run_id, "training_result.json",
                                                                         directory)
        result = json.loads(Path(path).read_text())
    return dict(run.data.metrics), result


def curve(result: dict[str, Any]) -> dict[str, list[float]]:
    """Validation accuracy against training minutes and examples seen; training accuracy per epoch."""
    examples_per_epoch = [row["samples_per_second"] * row["epoch_seconds"] for row in result["epochs"]]
    mean_per_epoch = sum(examples_per_epoch) / len(examples_per_epoch)
    return {"minutes": [row["train_seconds"] / 60 for row in result["evaluations"]],
            "examples": [row["epoch"] * mean_per_epoch for row in result["evaluations"]],
            "val_accuracy": [row["val_accuracy"] for row in result["evaluations"]],
            "epoch_minutes": [sum(row["epoch_seconds"] for row in result["epochs"][:n + 1]) / 60
                              for n in range(len(result["epochs"]))],
            "train_accuracy": [row["train_accuracy"] for row in result["epochs"]],
            "examples_per_epoch": mean_per_epoch}


def figures(name: str, spec: Any, metrics: dict[str, float], result: dict[str, Any]) -> dict[str, Any]:
    points = curve(result)
    accuracies = points["val_accuracy"]

    def by(share: float) -> float:
        """The best validation accuracy within the first ``share`` of this arm's training clock."""
        limit = share * points["minutes"][-1]
        return max((accuracy for minute, accuracy in zip(points["minutes"], accuracies, strict=True)
                    if minute <= limit), default=accuracies[0])

    return {"arm": name, "speakers": spec.speakers, "epochs": spec.epochs,
            "examples_per_epoch": points["examples_per_epoch"],
            "examples_seen": points["examples_per_epoch"] * spec.epochs,
            "training_minutes": metrics["training_seconds"] / 60,
            "val_quarter": by(0.25), "val_half": by(0.5), "val_end": accuracies[-1], "val_best": max(accuracies),
            "train_accuracy_end": points["train_accuracy"][-1],
            "test_accuracy": metrics.get("test_accuracy"),
            "open_set_false_accepts": metrics.get("open_set_false_accept_rate"),
            "closed_set_false_accepts": metrics.get("closed_set_false_accept_rate"),
            "samples_per_second": metrics.get("samples_per_second_mean"), "curve": points}


def draw(rows: list[dict[str, Any]], path: Path) -> None:
    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    figure, (clock, seen) = plt.subplots(1, 2, figsize=(12, 4.5))
    for row in rows:
        points = row["curve"]
        label = f"{row['arm']}: {row['speakers']} speakers × {row['epochs']} epochs"
        line, = clock.plot(points["minutes"], [100 * value for value in points["val_accuracy"]], label=label)
        clock.plot(points["epoch_minutes"], [100 * (value or 0) for value in points["train_accuracy"]],
                   linestyle="--", color=line.get_color(), label=f"{row['arm']}: training accuracy (epoch mean)")
        seen.plot([value / 1000 for value in points["examples"]],
                  [100 * value for value in points["val_accuracy"]], color=line.get_color(), label=label)
    clock.set_xlabel("training minutes (one core each, evaluations excluded)")
    seen.set_xlabel("training examples seen (thousands)")
    # From 40 %: the first epochs' chance-level start would squash the part worth reading (short runs: lower).
    lowest = min(min(row["curve"]["val_accuracy"][len(row["curve"]["val_accuracy"]) // 4:]) for row in rows)
    for axis in (clock, seen):
        axis.set_ylabel("accuracy (%)")
        axis.set_ylim(max(0.0, min(40.0, 100 * lowest - 5)), 100)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right", fontsize=8)
    figure.suptitle("Keyword spotter: validation accuracy, distinct data vs more passes (same examples seen)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main() -> None:
    from training.config import RunSpec, RunSpecError
    from training.contract import EVALUATE, TRAIN

    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, default=200, help="the passes arm's speakers (default: 200)")
    parser.add_argument("--factor", type=int, default=4,
                        help="the data arm's speakers and the passes arm's epochs are this many times larger "
                             "(default: 4)")
    parser.add_argument("--epochs", type=int, default=32, help="the data arm's epochs (default: 32)")
    parser.add_argument("--output", type=Path, default=BENCH_ROOT / "results.json", help="where results are saved")
    args = parser.parse_args()
    run = recorded_as(parser, args, RUNS)
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("the bench pins its two arms to two cores; this machine has one")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = {"workload": "kws_densenet_bilstm", "nodes": 1, "workers_per_node": 1, "learning_rate_decay": "cosine",
            "data_root": str(BENCH_ROOT / "data"), "tracking_uri": f"sqlite:///{BENCH_ROOT / 'mlflow.db'}"}
    try:  # the run settings' own bounds (speakers, epochs) refuse a bad flag, in one line
        specs = {name: RunSpec(**base, **changes, run_name=f"{name}-{stamp}", spark_master="local[2]").validate()
                 for name, changes in arms(args).items()}
    except RunSpecError as error:
        parser.error(f"{error} (from --speakers {args.speakers}, --factor {args.factor}, --epochs {args.epochs})")
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for name, spec in specs.items():
        print(f"{name}: {spec.speakers} speakers, {spec.epochs} epochs — data steps", flush=True)
        for step in spec.definition.steps[:spec.definition.steps.index(TRAIN)]:
            cloudburst(step, spec)
    data_seconds = time.perf_counter() - started
    print(f"training both arms side by side, one core each (started {time.strftime('%H:%M')})", flush=True)
    # The run is the pinned spec's: evaluate reads it back and refuses other settings.
    pinned = {name: spec.with_changes(spark_master="local[1]", threads_per_worker=1) for name, spec in specs.items()}
    walls = train_side_by_side(pinned)
    rows = []
    for name, spec in pinned.items():
        cloudburst(EVALUATE, spec)
        rows.append({**figures(name, spec, *run_record(spec)), "wall_minutes": walls[name] / 60})
    results = {"settings": {**base, "factor": args.factor}, "data_seconds": data_seconds, "rows": rows,
               "seconds": time.perf_counter() - started}
    args.output.write_text(json.dumps(results, indent=2))
    draw(rows, BENCH_ROOT / "curves.png")
    values, tables = result_tables(results)
    print()
    for row in tables["arms"]["rows"]:
        print("  " + ", ".join(f"{title} {row[field] if format == 'text' else round(row[field] or 0, 4)}"
                               for title, field, format in tables["arms"]["columns"]), flush=True)
    print(f"\ncurves: {BENCH_ROOT / 'curves.png'}; results: {args.output}")
    if publish_run(run, values, tables):
        draw(rows, FIGURE)


COLUMNS = [("arm", "arm", "text"), ("speakers", "speakers", "int"), ("epochs", "epochs", "int"),
           ("examples seen", "examples_seen", "int"), ("training min", "training_minutes", "num"),
           ("best val. by ¼ time", "val_quarter", "pct1"), ("best val. by ½ time", "val_half", "pct1"),
           ("val. at end", "val_end", "pct1"), ("training acc. at end", "train_accuracy_end", "pct1"),
           ("test", "test_accuracy", "pct1"), ("open-set false accepts", "open_set_false_accepts", "pct1"),
           ("closed-set false accepts", "closed_set_false_accepts", "pct1")]


def result_tables(results: dict[str, Any]) -> tuple[dict, dict]:
    """(values, tables) for docs/results: values data_minutes, factor and per arm (passes, data) every figure
    but the curve; the table "arms", as printed."""
    rows = results["rows"]
    values = {"data_minutes": results["data_seconds"] / 60, "factor": results["settings"]["factor"],
              **{row["arm"]: {name: value for name, value in row.items() if name != "curve"} for row in rows}}
    return values, {"arms": result_table(COLUMNS, [{name: row[name] for _, name, _ in COLUMNS} for row in rows])}


if __name__ == "__main__":
    main()
