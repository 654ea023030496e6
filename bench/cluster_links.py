"""MNIST on the several-host cluster (infra/cluster/netns.sh) at several link rates, measured in one run.

For each link rate (default 10gbit, 1gbit, 100mbit) the cluster is brought up with NODES worker hosts (default 3,
one worker each; each host a cgroup of CORES / NODES cores) and these train from scratch through YARN, as the
pipeline's train step does:

  horovod NxN1       Horovod on Spark, ring all-reduce over the hosts' links
  downpour n_push=K  Downpour SGD, n_fetch = n_push = K (default K = 1, 4, 16); the parameter server on this side
  averaging          model averaging, rounds_per_epoch rounds per epoch

against runs that do not communicate and so run once, at the first link rate:

  1x1                one worker on one host of the same size (its cgroup), through YARN: the speedup baseline
  ceiling S          strategy S's own NxN1 run with communication off (``communication=False``): the same workers,
                     hosts, YARN containers, data path and training loop, nothing sent, so the most that strategy's
                     code can do on NODES hosts. One per strategy: their loops differ (Downpour's ran 14 % faster
                     than Horovod's on 2026-12-05), and a ceiling measured with other code (plain Keras, before
                     2026-12-05) is no upper bound. A run above its strategy's ceiling by more than the noise (the
                     ceiling's spread between its epochs, at least report.CEILING_NOISE_MARGIN) ends the bench
                     non-zero, after the table, naming it.

Printed per link rate: samples/s (median over the epochs after the first), its ratio to 1x1 and to its strategy's
ceiling, seconds to the target validation accuracy (the training clock, evaluations excluded), the final
validation accuracy, the bytes the strategy moved (Downpour and averaging count them; Horovod's are the ring's
2(N-1)/N × 4 bytes × parameters per step per worker) and the bytes on the wire (the worker hosts' veth counters,
both directions, over the train step: parameters plus Spark's own traffic, the shards read from HDFS and the
containers' start). Also the cluster's start and stop times. Data: ingest → augment → shard (NODES and 1 shards)
on the cluster's HDFS once; `netns.sh down` keeps HDFS's data, so later link rates reuse it. Results also go
to var/bench/cluster/.

Root only (namespaces); takes the cluster over: a running one is taken down first, and it is down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from results import key, publish_run, recorded_as, table

from training import REPO_ROOT
from training.settings import STRATEGIES
from training.study.report import above_ceiling, relative_spread

SCRIPT = REPO_ROOT / "infra" / "cluster" / "netns.sh"
OUT = REPO_ROOT / "var" / "bench" / "cluster"
STEP_TIMEOUT_S = 3600
RUNS = {"bench-cluster": ("make bench-cluster", [])}


def netns(*arguments: str, timeout: float = 900) -> tuple[str, float]:
    """``netns.sh ARGUMENTS``: its output and seconds; a failure ends the bench with netns.sh's own words."""
    started = time.perf_counter()
    done = subprocess.run([str(SCRIPT), *arguments], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"netns.sh {' '.join(arguments)} failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout, time.perf_counter() - started


def client_environment() -> dict[str, str]:
    settings = {}
    for line in netns("env", timeout=30)[0].splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        settings[name] = value.strip("'")
    return settings


def wire_bytes(nodes: int) -> int:
    """Bytes through every worker host's link so far, both directions."""
    total = 0
    for index in range(1, nodes + 1):
        statistics_dir = Path(f"/sys/class/net/v-cb-node{index}/statistics")
        total += int((statistics_dir / "rx_bytes").read_text()) + int((statistics_dir / "tx_bytes").read_text())
    return total


def step(name: str, spec, environment: dict[str, str], label: str) -> float:
    """``cloudburst NAME`` with the spec's settings, its output in var/bench/cluster/<label>.log; seconds."""
    log = OUT / f"{label}.log"
    command = [str(Path(sys.executable).parent / "cloudburst"), name, *spec.to_args()]
    started = time.perf_counter()
    with log.open("w") as output:
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=environment, check=False,
                              timeout=STEP_TIMEOUT_S)
    if done.returncode != 0:
        sys.exit(f"{name} ({label}) failed: see {log}")
    return time.perf_counter() - started


def fresh(spec) -> None:
    """No checkpoints of an earlier bench under this run name: every run trains from scratch."""
    from training import storage

    where = storage.resolve(spec.run_uri())
    if where.fs.exists(where.path):
        where.fs.rm(where.path, recursive=True)


def ring_bytes(spec, steps_per_epoch: int, epochs: int) -> float:
    """What Horovod's ring all-reduce sends, all workers together: 2(N-1) × 4 bytes × parameters per step."""
    from training.workload_registry import workload_for

    parameters = workload_for(spec).build_model().count_params()
    return 2 * (spec.total_workers - 1) * 4 * parameters * steps_per_epoch * epochs


def train(spec, environment: dict[str, str], label: str, nodes: int) -> dict[str, Any]:
    import mlflow

    fresh(spec)
    before = wire_bytes(nodes)
    wall = step("train", spec, environment, label)
    on_the_wire = wire_bytes(nodes) - before
    client = mlflow.MlflowClient(spec.tracking_uri)
    [run] = client.search_runs([client.get_experiment_by_name(spec.workload).experiment_id],
                               f"tags.cloudburst_run = '{spec.run_name}'")
    rates = [m.value for m in sorted(client.get_metric_history(run.info.run_id, "samples_per_second"),
                                     key=lambda m: m.step)]
    accuracy = sorted(client.get_metric_history(run.info.run_id, "val_accuracy"), key=lambda m: m.step)
    metrics = run.data.metrics
    moved = metrics.get("bytes_moved")
    if spec.strategy == "horovod" and spec.total_workers > 1 and spec.communication:
        moved = ring_bytes(spec, int(run.data.tags["steps_per_epoch"]), len(rates))
    return {"label": label, "samples_per_second": statistics.median(rates[1:] or rates), "epoch_rates": rates,
            "time_to_target_seconds": metrics.get("time_to_target_seconds"),
            "final_accuracy": accuracy[-1].value if accuracy else None, "bytes_moved": moved,
            "wire_bytes": on_the_wire, "wall_seconds": wall, "lost_workers": metrics.get("lost_workers")}


def strategy_of(name: str) -> str:
    """The strategy a contender's name starts with ("downpour n_push=4" → "downpour")."""
    return name.split()[0]


def ceilings(base, environment: dict[str, str], nodes: int, epochs: int, stamp: str,
             strategies: list[str]) -> dict[str, dict[str, Any]]:
    """Each strategy's own run on all the hosts with communication off, through YARN like the runs it bounds."""
    measured = {}
    for strategy in strategies:
        label = f"{stamp}-ceiling-{strategy}"
        spec = base.with_changes(strategy=strategy, communication=False, epochs=epochs, run_name=label)
        measured[strategy] = train(spec, environment, label, nodes)
        print(f"  ceiling {strategy}: {measured[strategy]['samples_per_second']:,.0f} samples/s", flush=True)
    return measured


def row(name: str, measured: dict[str, Any], baseline: float, ceiling_rate: float) -> str:
    rate = measured["samples_per_second"]
    seconds = measured.get("time_to_target_seconds")
    accuracy = measured.get("final_accuracy")
    moved, wire = measured.get("bytes_moved"), measured.get("wire_bytes")
    return (f"| {name} | {rate:,.0f} | {rate / baseline:.2f}× | {rate / ceiling_rate:.0%} | "
            f"{f'{seconds:,.1f}' if seconds else 'not reached'} | "
            f"{f'{100 * accuracy:.2f} %' if accuracy is not None else '–'} | "
            f"{f'{moved / 1e9:.2f} GB' if moved else '–'} | {f'{wire / 1e9:.2f} GB' if wire else '–'} |")


def result_tables(results: dict[str, Any], target: float) -> tuple[dict, dict]:
    """(values, tables) for docs/results from the results the bench saves (var/bench/cluster/<stamp>.json: its
    settings, "1x1", "ceilings" per strategy, per link "up_seconds", "down_seconds" and "runs" per contender).
    values: settings; one_by_one (samples_per_second, seconds_to_target); ceilings per strategy (samples_per_second,
    epoch_spread); runs per link (10gbit, …) per contender (``key``: horovod_3x1, downpour_n_push_4, averaging):
    samples_per_second, speedup (× 1x1), of_ceiling, seconds_to_target, final_accuracy, gigabytes_moved,
    gigabytes_on_the_wire; cluster per link: up_seconds, down_seconds. tables: "runs" and "cluster", as printed."""
    baseline = results["1x1"]["samples_per_second"]
    ceiling_rates = {strategy: run["samples_per_second"] for strategy, run in results["ceilings"].items()}
    rows = []
    for link, measured in results["links"].items():
        for name, run in measured["runs"].items():
            rate = run["samples_per_second"]
            moved, wire = run.get("bytes_moved"), run.get("wire_bytes")
            rows.append({"link": link, "configuration": name, "samples_per_second": rate, "speedup": rate / baseline,
                         "of_ceiling": rate / ceiling_rates[strategy_of(name)],
                         "seconds_to_target": run.get("time_to_target_seconds") or None,
                         "final_accuracy": run.get("final_accuracy"),
                         "gigabytes_moved": moved / 1e9 if moved else None,
                         "gigabytes_on_the_wire": wire / 1e9 if wire else None})
    fields = ("samples_per_second", "speedup", "of_ceiling", "seconds_to_target", "final_accuracy",
              "gigabytes_moved", "gigabytes_on_the_wire")
    values = {"settings": dict(results["settings"]),
              "one_by_one": {"samples_per_second": baseline,
                             "seconds_to_target": results["1x1"].get("time_to_target_seconds")},
              "ceilings": {strategy: {"samples_per_second": run["samples_per_second"],
                                      "epoch_spread": relative_spread(run["epoch_rates"][1:]) or 0.0}
                           for strategy, run in results["ceilings"].items()},
              "runs": {link: {key(row["configuration"]): {field: row[field] for field in fields}
                              for row in rows if row["link"] == link} for link in results["links"]},
              "cluster": {link: {"up_seconds": measured["up_seconds"], "down_seconds": measured["down_seconds"]}
                          for link, measured in results["links"].items()}}
    runs = table([("link", "link", "text"), ("configuration", "configuration", "text"),
                  ("samples/s", "samples_per_second", "int"), ("× 1x1", "speedup", "x"),
                  ("of its ceiling", "of_ceiling", "pct1"), (f"s to {target:.1%}", "seconds_to_target", "s"),
                  ("final accuracy", "final_accuracy", "pct"), ("GB moved", "gigabytes_moved", "num"),
                  ("GB on the wire", "gigabytes_on_the_wire", "num")], rows)
    cluster = table([("link", "link", "text"), ("cluster up", "up_seconds", "s"),
                     ("cluster down", "down_seconds", "s")],
                    [{"link": link, **values["cluster"][link]} for link in results["links"]])
    return values, {"runs": runs, "cluster": cluster}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", default="10gbit,1gbit,100mbit", help="link rates, comma-separated (default "
                        "%(default)s)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="strategies to run, comma-separated, each with its own ceiling (default %(default)s)")
    parser.add_argument("--nodes", type=int, default=3, help="worker hosts, one worker each (default 3)")
    parser.add_argument("--n-push", default="1,4,16", help="Downpour's n_fetch = n_push values (default 1,4,16)")
    parser.add_argument("--epochs", type=int, default=6, help="epochs per training run (default 6)")
    parser.add_argument("--batch", type=int, default=128, help="batch size per worker (default 128)")
    parser.add_argument("--ceiling-epochs", type=int, default=0,
                        help="epochs of each strategy's ceiling run (default 0: as many as the runs, whose rate "
                             "still rose over their first 3 epochs on 2026-12-05; the first, which traces the "
                             "graphs, is not counted)")
    parser.add_argument("--target", type=float, default=0.99, help="target validation accuracy (default 0.99)")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images only (a smoke run)")
    parser.add_argument("--test-limit", type=int, default=0, help="first N test images only (a smoke run)")
    args = parser.parse_args()
    run = recorded_as(parser, args, RUNS)
    if os.geteuid() != 0:
        sys.exit("the cluster bench needs root (network namespaces)")
    args.ceiling_epochs = args.ceiling_epochs or args.epochs
    if args.ceiling_epochs < 2:
        parser.error("--ceiling-epochs: at least 2 (the first epoch, which traces the graphs, is not counted)")
    links = [link.strip() for link in args.links.split(",") if link.strip()]
    strategies = [name.strip() for name in args.strategies.split(",") if name.strip()]
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown or not strategies:
        parser.error(f"--strategies: {', '.join(unknown) or 'none given'}; choose from {', '.join(STRATEGIES)}")
    pushes = [int(value) for value in args.n_push.split(",") if value.strip()]
    OUT.mkdir(parents=True, exist_ok=True)
    from training.config import RunSpec
    from training.console import configure_logging

    configure_logging()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    started = time.perf_counter()
    results: dict[str, Any] = {"settings": vars(args), "links": {}}
    netns("down", timeout=300)
    base = None
    environment: dict[str, str] = {}
    for link in links:
        _, up_seconds = netns("up", str(args.nodes), link)
        print(f"\n[{link}] cluster of {args.nodes} worker hosts up in {up_seconds:.0f} s", flush=True)
        if base is None:
            netns("spark-archive")
            environment = {**os.environ, "CLOUDBURST_SPARK_PROGRESS": "false", **client_environment()}
            os.environ["CLOUDBURST_WEBHDFS_PORT"] = environment["CLOUDBURST_WEBHDFS_PORT"]
            base = RunSpec.from_mapping({
                "epochs": args.epochs, "batch_size_per_worker": args.batch, "target_accuracy": args.target,
                "threads_per_worker": 1, "spark_master": "yarn", "nodes": args.nodes, "workers_per_node": 1,
                "data_root": f"{environment['CLOUDBURST_HDFS_URI']}/cloudburst-bench/{stamp}",
                "tracking_uri": f"sqlite:///{OUT / 'mlflow.db'}",
                **({"train_limit": args.train_limit} if args.train_limit else {}),
                **({"test_limit": args.test_limit} if args.test_limit else {})})
            for name in ("ingest", "augment", "shard"):
                seconds = step(name, base, environment, f"{stamp}-{name}")
                print(f"  {name}: {seconds:.0f} s", flush=True)
            step("shard", base.with_changes(nodes=1), environment, f"{stamp}-shard-1")
            results["ceilings"] = ceilings(base, environment, args.nodes, args.ceiling_epochs, stamp,
                                           strategies)
            one = base.with_changes(nodes=1, strategy="horovod", run_name=f"{stamp}-1x1")
            results["1x1"] = train(one, environment, f"{stamp}-1x1", args.nodes)
            print(f"  1x1: {results['1x1']['samples_per_second']:,.0f} samples/s", flush=True)
        contenders = [(f"horovod {args.nodes}x1", {"strategy": "horovod"})]
        contenders += [(f"downpour n_push={k}", {"strategy": "downpour", "n_push": k, "n_fetch": k}) for k in pushes]
        contenders += [("averaging", {"strategy": "averaging"})]
        contenders = [(name, changes) for name, changes in contenders if changes["strategy"] in strategies]
        measured = {}
        for name, changes in contenders:
            label = f"{stamp}-{link}-{name.replace(' ', '-').replace('=', '')}"
            measured[name] = train(base.with_changes(run_name=label, **changes), environment, label, args.nodes)
            print(f"  {name}: {measured[name]['samples_per_second']:,.0f} samples/s, "
                  f"{measured[name]['wall_seconds']:.0f} s", flush=True)
        _, down_seconds = netns("down", timeout=300)
        results["links"][link] = {"up_seconds": up_seconds, "down_seconds": down_seconds, "runs": measured}
        (OUT / f"{stamp}.json").write_text(json.dumps(results, indent=2))

    elapsed = time.perf_counter() - started
    baseline = results["1x1"]["samples_per_second"]
    ceiling_rates = {strategy: run["samples_per_second"] for strategy, run in results["ceilings"].items()}
    # One run each, so the noise a run may show above its ceiling is the ceiling's own spread between its epochs.
    ceiling_spreads = {strategy: relative_spread(run["epoch_rates"][1:]) or 0.0
                       for strategy, run in results["ceilings"].items()}
    print(f"\n## MNIST on {args.nodes} worker hosts (one worker each), batch {args.batch} per worker, "
          f"{args.epochs} epochs; measured in one run of {elapsed / 60:.0f} min\n")
    one_target = results["1x1"]["time_to_target_seconds"]
    print(f"1x1 (one host's share of the cores): {baseline:,.0f} samples/s, "
          f"{f'{one_target:,.1f} s' if one_target else 'not'} to {args.target:.1%}; each strategy's ceiling (its "
          f"{args.nodes} workers, communication off, {args.ceiling_epochs} epochs): "
          + ", ".join(f"{strategy} {rate:,.0f} samples/s (epochs {ceiling_spreads[strategy]:.0%} apart)"
                      for strategy, rate in ceiling_rates.items()) + "\n")
    print(f"| link | configuration | samples/s | × 1x1 | of its ceiling | s to {args.target:.1%} | final accuracy | "
          "bytes moved | on the wire |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios, margins = {}, {}
    for link, measured in results["links"].items():
        for name, values in measured["runs"].items():
            ceiling_rate = ceiling_rates[strategy_of(name)]
            ratios[f"{link} {name}"] = values["samples_per_second"] / ceiling_rate
            margins[f"{link} {name}"] = ceiling_spreads[strategy_of(name)]
            print(f"| {link} " + row(name, values, baseline, ceiling_rate))
    print("\n| link | cluster up | cluster down |\n|---|---|---|")
    for link, measured in results["links"].items():
        print(f"| {link} | {measured['up_seconds']:.0f} s | {measured['down_seconds']:.0f} s |")
    print(f"\nresults: {OUT / f'{stamp}.json'}")
    problem = above_ceiling(ratios, margins)
    if problem:  # a ceiling measured other work: nothing is recorded in docs/results
        sys.exit(problem)
    publish_run(run, *result_tables(results, args.target))


if __name__ == "__main__":
    main()
