"""What a study measured, from its runs in MLflow: one row per configuration (the median of its repetitions), the
ratios every row is judged by — speedup and efficiency against the study's own baseline, the share of its
ceiling it reached — the figures, and the advice. Needs mlflow and matplotlib, not TensorFlow: the Airflow
environment runs it, and so does ``cloudburst advise``."""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from training.study.plan import BASELINE, CEILING, RUN

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from mlflow import MlflowClient

# A run may measure a little above its ceiling by noise alone; more than this — or than the study's own noise,
# when that is larger — means the ceiling measured something other than the strategy's own work. The study's
# noise is the largest spread between repetitions of one configuration: on this 2-core machine the same run
# measured up to 25 % apart a few minutes later (2026-12-02), so one repetition cannot judge a ceiling.
CEILING_NOISE_MARGIN = 0.03

STUDY_TAG = "cloudburst.study"  # on the parent run: the study's name; on each child: the parent's name too
ROLE_TAG = "cloudburst.study_role"
RECOMMENDATION_TAG = "cloudburst.recommendation"
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a run under the run this names

FASTEST_TO_TARGET = "fastest_to_target"
DEFAULT_GOAL = FASTEST_TO_TARGET  # the goal the DAG closes a study with, and `cloudburst advise`'s default
GOALS = {
    FASTEST_TO_TARGET: "fastest to the target accuracy (training clock)",
    "samples_per_core_second": "most training samples per core-second",
    "cheapest_under_time_limit": "fewest core-seconds among runs whose training fits the time limit",
}


class StudyError(ValueError):
    """The study cannot be reported honestly (a run missing, a strategy above its ceiling); one line says why."""


@dataclass
class Row:
    label: str
    role: str
    strategy: str
    nodes: int
    workers_per_node: int
    total_workers: int
    threads_per_worker: int
    n_push: int
    repetitions: int
    samples_per_second: float
    training_seconds: float
    wall_seconds: float
    time_to_target_seconds: float | None
    test_accuracy: float | None
    bytes_moved: float
    run_id: str  # the repetition nearest the median throughput: the run the row stands for
    cores: int  # what its workers computed on: total workers × the threads each had (the run's own tag)
    spread: float | None = None  # (max − min) ÷ median samples/s of its repetitions; None for one
    variant: str = ""  # the run settings this row's variant changed ("" for none)
    speedup: float | None = None  # samples/s ÷ the baseline's
    efficiency: float | None = None  # speedup ÷ total workers
    ceiling_ratio: float | None = None  # samples/s ÷ its ceiling's (same strategy and shape, communication off)
    communication_share: float | None = None  # 1 − ceiling_ratio: the share of a step communication costs
    time_to_target_speedup: float | None = None
    # What the cost model needs of a configuration (training.study.study_model); 0 when unknown.
    batch_size_per_worker: int = 0
    n_fetch: int = 0
    parameters: int = 0  # the model's, as its evaluate step logged it (model_parameters)
    steps_per_epoch: int = 0  # one worker's: samples trained per epoch ÷ workers ÷ batch
    link_rate: str = ""  # the namespace cluster's link rate it trained at ("" : links as they were)



def child_runs(mlflow_client: MlflowClient, experiment_id: str, configurations: Sequence[dict[str, Any]]
               ) -> dict[str, Any]:
    """run_name → the newest finished MLflow run of each configuration (the study's run names are its own)."""
    found: dict[str, Any] = {}
    for configuration in configurations:
        run_name = configuration["settings"]["run_name"]
        runs = mlflow_client.search_runs([experiment_id], f"tags.cloudburst_run = '{run_name}' and "
                                         "attributes.status = 'FINISHED'", order_by=["attributes.start_time DESC"],
                                         max_results=1)
        if not runs:
            raise StudyError(f"configuration {configuration['label']} (run {run_name}) has no finished MLflow run")
        found[run_name] = runs[0]
    return found


def nest(mlflow_client: MlflowClient, parent_run_id: str, study_name: str, configurations: Sequence[dict[str, Any]],
         runs: dict[str, Any]) -> None:
    """Every configuration's run under the study's parent run in the MLflow UI, tagged with its study and role."""
    for configuration in configurations:
        run = runs[configuration["settings"]["run_name"]]
        for key, value in {PARENT_TAG: parent_run_id, STUDY_TAG: study_name, ROLE_TAG: configuration["role"]}.items():
            mlflow_client.set_tag(run.info.run_id, key, value)


def rows_from_runs(configurations: Sequence[dict[str, Any]], runs: dict[str, Any]) -> list[Row]:
    """One row per label: the median of its repetitions, ratios filled in by ``judge``."""
    by_label: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for configuration in configurations:
        by_label.setdefault(configuration["label"], []).append(
            (configuration, runs[configuration["settings"]["run_name"]]))
    rows = []
    for label, members in by_label.items():
        configuration = members[0][0]
        settings = configuration["settings"]
        metrics = [run.data.metrics for _, run in members]
        throughput = [m["samples_per_second_mean"] for m in metrics]
        middle = statistics.median(throughput)
        representative = min(members, key=lambda m: abs(m[1].data.metrics["samples_per_second_mean"] - middle))
        reached = [m["time_to_target_seconds"] for m in metrics if "time_to_target_seconds" in m]
        threads = representative[1].data.tags.get("threads_per_worker")
        if threads is None:
            raise StudyError(f"configuration {label}: its run has no threads_per_worker tag, so its cores are "
                             "unknown (was it trained by Cloudburst?)")
        rows.append(Row(
            label=label, role=configuration["role"], strategy=settings["strategy"], nodes=settings["nodes"],
            workers_per_node=settings["workers_per_node"],
            total_workers=settings["nodes"] * settings["workers_per_node"],
            threads_per_worker=settings["threads_per_worker"], n_push=settings["n_push"], repetitions=len(members),
            samples_per_second=middle, training_seconds=statistics.median(m["training_seconds"] for m in metrics),
            wall_seconds=statistics.median(m["wall_seconds"] for m in metrics),
            # Reached in fewer than half the repetitions: the median run did not reach it.
            time_to_target_seconds=statistics.median(reached) if 2 * len(reached) > len(members) else None,
            test_accuracy=_median_of(metrics, "test_accuracy"), bytes_moved=_median_of(metrics, "bytes_moved") or 0.0,
            run_id=representative[1].info.run_id, variant=configuration.get("variant", ""),
            cores=int(threads) * settings["nodes"] * settings["workers_per_node"],
            spread=relative_spread(throughput),
            batch_size_per_worker=int(settings.get("batch_size_per_worker", 0)),
            n_fetch=int(settings.get("n_fetch", 0)),
            parameters=int(_median_of(metrics, "model_parameters") or 0),
            steps_per_epoch=_steps_per_epoch(settings, middle,
                                             statistics.median(m["training_seconds"] for m in metrics)),
            link_rate=str(settings.get("link_rate", ""))))
    return rows


def ceiling_tolerance(rows: Sequence[Row]) -> float | None:
    """How far above its ceiling a run may measure by noise alone: the study's largest spread between
    repetitions, at least CEILING_NOISE_MARGIN; None when nothing was repeated (no noise estimate)."""
    spreads = [row.spread for row in rows if row.spread is not None]
    return max(CEILING_NOISE_MARGIN, *spreads) if spreads else None


def relative_spread(rates: Sequence[float]) -> float | None:
    """(largest − smallest) ÷ median: how far apart measurements of one thing came; None for fewer than two."""
    return (max(rates) - min(rates)) / statistics.median(rates) if len(rates) > 1 else None


def furthest_above(ratios: dict[str, float], margins: dict[str, float]) -> tuple[str, float] | None:
    """Of the contenders (name → measured rate ÷ its own ceiling's), the one furthest above 1 + its margin (the
    noise it may show by that alone; never less than CEILING_NOISE_MARGIN), with the ratio it was allowed; None
    when each is within its allowance."""
    allowed = {name: 1 + max(CEILING_NOISE_MARGIN, margins.get(name, 0.0)) for name in ratios}
    over = [(ratio / allowed[name], name) for name, ratio in ratios.items() if ratio > allowed[name]]
    if not over:
        return None
    _, name = max(over)
    return name, allowed[name]


def above_ceiling(ratios: dict[str, float], margins: dict[str, float] | None = None) -> str | None:
    """For a benchmark's contenders: one line naming the one furthest above its allowance (:func:`furthest_above`;
    ``margins`` e.g. each ceiling's spread between epochs), else None. Above that, the ceiling measured other work
    than the contender's, so no ratio is honest."""
    found = furthest_above(ratios, margins or {})
    if found is None:
        return None
    name, allowed = found
    return (f"{name} measured {ratios[name]:.1%} of its own ceiling (more than {allowed:.0%}, the noise "
            "allowed): the ceiling did not measure the strategy's own work")


def ceiling_verdict(rows: Sequence[Row]) -> str:
    """One line on the ceiling check, for the report and the parent run's tag."""
    tolerance = ceiling_tolerance(rows)
    worst = max((row for row in rows if row.ceiling_ratio is not None), key=lambda row: row.ceiling_ratio or 0,
                default=None)
    if worst is None:
        return "no ceiling to check"
    if tolerance is None:
        return (f"not judged: one repetition gives no noise estimate (highest: {worst.label} at "
                f"{worst.ceiling_ratio:.0%} of its ceiling); run repetitions ≥ 2")
    return (f"passed: every run within its ceiling + {tolerance:.0%} (the study's noise); highest {worst.label} at "
            f"{worst.ceiling_ratio:.0%}")


def judge(rows: list[Row]) -> list[Row]:
    """Fill in every row's ratios; StudyError when a run beat its ceiling by more than the study's noise (see
    ceiling_tolerance). With one repetition there is no noise estimate: the ratios are reported, not judged."""
    [baseline] = [row for row in rows if row.role == BASELINE] or [None]
    if baseline is None:
        raise StudyError("the study has no baseline row")
    ceilings = {(row.strategy, row.nodes, row.workers_per_node, row.threads_per_worker): row
                for row in rows if row.role == CEILING}
    for row in rows:
        row.speedup = row.samples_per_second / baseline.samples_per_second
        row.efficiency = row.speedup / row.total_workers
        if row.time_to_target_seconds and baseline.time_to_target_seconds:
            row.time_to_target_speedup = baseline.time_to_target_seconds / row.time_to_target_seconds
        ceiling = ceilings.get((row.strategy, row.nodes, row.workers_per_node, row.threads_per_worker))
        if row.role == RUN and ceiling is not None:
            row.ceiling_ratio = row.samples_per_second / ceiling.samples_per_second
            row.communication_share = max(0.0, 1 - row.ceiling_ratio)
    tolerance = ceiling_tolerance(rows)
    judged = {row.label: row for row in rows if tolerance is not None and row.ceiling_ratio is not None}
    found = furthest_above({label: row.ceiling_ratio or 0.0 for label, row in judged.items()},
                           dict.fromkeys(judged, tolerance or 0.0))
    if found is not None:
        worst = judged[found[0]]
        raise StudyError(f"{worst.label} measured {worst.samples_per_second:,.0f} samples/s, "
                         f"{worst.ceiling_ratio:.0%} of its ceiling (allowed {found[1]:.0%}, the study's noise): "
                         "the ceiling did not measure the same work; the study's ratios would not be honest")
    return rows


def table_csv(rows: Sequence[Row]) -> str:
    buffer = io.StringIO()
    fields = list(asdict(rows[0]))
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(value) for key, value in asdict(row).items()})
    return buffer.getvalue()


def table_text(rows: Sequence[Row]) -> str:
    """The table as people read it in a terminal or a task log."""
    lines = [f"{'configuration':32} {'workers':>7} {'samples/s':>10} {'speedup':>8} {'effic.':>7} {'ceiling':>8} "
             f"{'to target':>10} {'accuracy':>9}"]
    for row in rows:
        lines.append(f"{row.label:32} {row.total_workers:7d} {row.samples_per_second:10,.0f} "
                     f"{_ratio(row.speedup):>8} {_percent(row.efficiency):>7} {_percent(row.ceiling_ratio):>8} "
                     f"{_seconds(row.time_to_target_seconds):>10} {_percent(row.test_accuracy, 2):>9}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Advice:
    goal: str
    chosen: Row | None
    runner_up: Row | None
    reason: str


def advise(rows: Sequence[Row], goal: str = DEFAULT_GOAL, time_limit_seconds: float | None = None) -> Advice:
    """The configuration to run for ``goal`` among the study's runs and baseline (a ceiling trains no usable
    model), with the runner-up and why."""
    if goal not in GOALS:
        raise StudyError(f"goal={goal!r}: must be one of {', '.join(GOALS)}")
    if time_limit_seconds is not None and not time_limit_seconds > 0:
        raise StudyError(f"time limit {time_limit_seconds!r} s: must be a positive number of seconds")
    candidates = [row for row in rows if row.role in (RUN, BASELINE)]
    if goal == FASTEST_TO_TARGET:
        reached = [row for row in candidates if row.time_to_target_seconds is not None]
        ranked = sorted(reached, key=lambda row: row.time_to_target_seconds or 0)
        why = "reached the target accuracy first: {:.0f} s of training"
        value = lambda row: row.time_to_target_seconds  # noqa: E731 (read beside its format)
        if not ranked:  # nobody reached it: the most accurate, then the fastest
            ranked = sorted(candidates, key=lambda row: (-(row.test_accuracy or 0), row.training_seconds))
            why, value = "no run reached the target; the most accurate: {:.2%} test accuracy", \
                lambda row: row.test_accuracy or 0
    elif goal == "samples_per_core_second":
        ranked = sorted(candidates, key=lambda row: -row.samples_per_second / row.cores)
        why, value = "{:,.0f} samples per core-second", lambda row: row.samples_per_second / row.cores
    else:
        limit = time_limit_seconds if time_limit_seconds is not None else float("inf")
        fitting = [row for row in candidates if row.training_seconds <= limit]
        ranked = sorted(fitting, key=lambda row: row.training_seconds * row.cores)
        why, value = "{:,.0f} core-seconds of training within the limit", \
            lambda row: row.training_seconds * row.cores
    if not ranked:
        return Advice(goal, None, None, "no configuration of the study meets this goal")
    chosen, runner_up = ranked[0], (ranked[1] if len(ranked) > 1 else None)
    reason = f"{chosen.label} {why.format(value(chosen))}"
    if runner_up is not None:
        reason += f"; runner-up {runner_up.label}: {why.format(value(runner_up)).split(':')[-1].strip()}"
    return Advice(goal, chosen, runner_up, reason)


def advice_markdown(study_name: str, rows: Sequence[Row], advice: Advice) -> str:
    lines = [f"# Study {study_name}: recommendation", "", f"**Goal:** {GOALS[advice.goal]}.", ""]
    if advice.chosen is None:
        lines.append(advice.reason)
    else:
        lines += [f"**Run {advice.chosen.label}** ({advice.chosen.strategy}, {advice.chosen.nodes} node(s) × "
                  f"{advice.chosen.workers_per_node} worker(s), MLflow run `{advice.chosen.run_id}`).", "",
                  f"Why: {advice.reason}."]
    lines += ["", f"Ceiling check: {ceiling_verdict(rows)}.", "",
              "All measured in this study (medians of its repetitions):", "", "```", table_text(rows), "```"]
    return "\n".join(lines) + "\n"


# Figures ------------------------------------------------------------------------------------------------------------
def speedup_figure(rows: Sequence[Row], title: str) -> Figure:
    """Speedup and efficiency against total workers, a line per strategy (the best n_push/threads at each count),
    with the linear line and the ceilings measured in the study."""
    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    figure, (speedup_axis, efficiency_axis) = plt.subplots(1, 2, figsize=(11, 4))
    workers = sorted({row.total_workers for row in rows})
    speedup_axis.plot(workers, workers, color="grey", linestyle="--", label="linear")
    baselines = [row for row in rows if row.role == BASELINE]
    for role, marker in ((RUN, "o"), (CEILING, "^")):
        for strategy in sorted({row.strategy for row in rows if row.role == role}):
            # every strategy's line starts at the study's 1-worker baseline (speedup 1 by definition)
            best: dict[int, Row] = {1: baselines[0]} if role == RUN and baselines else {}
            for row in rows:
                if row.role != role or row.strategy != strategy:
                    continue
                if row.total_workers not in best or row.samples_per_second > best[row.total_workers].samples_per_second:
                    best[row.total_workers] = row
            counts = sorted(best)
            label = strategy if role == RUN else f"{strategy} ceiling (no communication)"
            style = "-" if role == RUN else ":"
            speedup_axis.plot(counts, [best[n].speedup for n in counts], marker=marker, linestyle=style, label=label)
            efficiency_axis.plot(counts, [best[n].efficiency for n in counts], marker=marker, linestyle=style,
                                 label=label)
    speedup_axis.set(xlabel="total workers", ylabel="speedup (samples/s ÷ 1 worker's)", title="speedup")
    efficiency_axis.set(xlabel="total workers", ylabel="efficiency (speedup ÷ workers)", title="efficiency")
    efficiency_axis.axhline(1.0, color="grey", linestyle="--")
    for axis in (speedup_axis, efficiency_axis):
        axis.set_xticks(workers)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def time_to_target_figure(rows: Sequence[Row], title: str) -> Figure:
    """Training time to the target accuracy per configuration (a hatched bar: not reached, its training time)."""
    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    shown = [row for row in rows if row.role != CEILING]
    figure, axis = plt.subplots(figsize=(max(6, 0.6 * len(shown) + 2), 4))
    for index, row in enumerate(shown):
        reached = row.time_to_target_seconds is not None
        axis.bar(index, row.time_to_target_seconds if reached else row.training_seconds,
                 hatch=None if reached else "//", alpha=1 if reached else 0.4, color=f"C{index % 10}")
    axis.set_xticks(range(len(shown)), [row.label for row in shown], rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("training seconds to the target")
    axis.set_title(f"{title}\ntime to target accuracy (hatched: not reached; its whole training time)", fontsize=10)
    axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    return figure


def workers_per_node_figure(rows: Sequence[Row], title: str) -> Figure:
    """Claim (a): throughput at fixed cores per node, by workers per node, a line per strategy and threads."""
    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.5, 4))
    groups: dict[tuple[str, int, str], list[Row]] = {}
    for row in rows:
        if row.role in (RUN, BASELINE):
            kind = row.strategy if row.role == RUN else "baseline"
            groups.setdefault((kind, row.nodes, f"t{row.threads_per_worker}"), []).append(row)
    for (kind, nodes, threads), members in sorted(groups.items()):
        best: dict[int, float] = {}
        for row in members:
            best[row.workers_per_node] = max(best.get(row.workers_per_node, 0), row.samples_per_second)
        counts = sorted(best)
        axis.plot(counts, [best[n] for n in counts], marker="o", label=f"{kind}, {nodes} node(s), {threads}")
    axis.set(xlabel="workers per node", ylabel="samples / s", title=title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def link_rate_bits(text: str) -> float:
    """A link rate as netns.sh and tc take it (100mbit, 10gbit) in bits per second."""
    found = re.fullmatch(r"([0-9]+)(kbit|mbit|gbit)", text)
    if found is None:
        raise StudyError(f"link rate {text!r}: expected e.g. 100mbit or 10gbit")
    return int(found.group(1)) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[found.group(2)]


def throughput_by_link_figure(rows: Sequence[Row], title: str) -> Figure | None:
    """Claim (b): samples/s against link rate, a line per configuration that communicates (its label without the
    link), each strategy's ceiling (communication off) as a dotted level; None when the study ran at fewer than
    two link rates."""
    measured = [row for row in rows if row.role == RUN and row.link_rate]
    if len({row.link_rate for row in measured}) < 2:
        return None
    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.2))
    lines: dict[str, list[Row]] = {}
    for row in measured:
        lines.setdefault(row.label.removesuffix(f"-{row.link_rate}"), []).append(row)
    for index, (name, members) in enumerate(sorted(lines.items())):
        members.sort(key=lambda row: link_rate_bits(row.link_rate))
        axis.plot([link_rate_bits(row.link_rate) for row in members], [row.samples_per_second for row in members],
                  marker="o", color=f"C{index % 10}", label=name)
    for index, row in enumerate(row for row in rows if row.role == CEILING):
        axis.axhline(row.samples_per_second, color=f"C{(index + len(lines)) % 10}", linestyle=":",
                     label=f"{row.label} (no communication)")
    baseline = next((row for row in rows if row.role == BASELINE), None)
    if baseline is not None:
        axis.axhline(baseline.samples_per_second, color="grey", linestyle="--", label="baseline: 1 worker")
    axis.set(xscale="log", xlabel="link rate (bit/s, each host's link shaped with tc)", ylabel="samples / s",
             title=title)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7)
    figure.tight_layout()
    return figure


def _steps_per_epoch(settings: dict[str, Any], samples_per_second: float, training_seconds: float) -> int:
    workers = settings["nodes"] * settings["workers_per_node"]
    epochs, batch = settings.get("epochs", 0), settings.get("batch_size_per_worker", 0)
    if not epochs or not batch:
        return 0
    return max(1, round(samples_per_second * training_seconds / epochs / workers / batch))


def _median_of(metrics: Sequence[dict[str, float]], name: str) -> float | None:
    values = [m[name] for m in metrics if name in m]
    return statistics.median(values) if values else None


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _percent(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}%}"


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f} s"
