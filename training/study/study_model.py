"""The communication cost model (:mod:`training.study.cost_model`) fitted to a study's own rows, checked by leaving
one configuration out at a time, then extrapolated to clusters the study could not run. Pure functions over
:class:`training.study.report.Row`; the parent run logs what they return.

What a study gives the model:

- compute per example, by strategy and threads per worker, from that strategy's ceiling (N workers that do not
  communicate, all busy at once: N ÷ their samples/s), else from any ceiling with those threads, else from its
  baseline (one worker);
- one observation per configuration that communicates (its median samples/s), the baseline and ceilings being the
  inputs above rather than observations;
- the link: a study with link profiles (two or more ``link_rates`` on the namespace cluster) gives each run its
  shaped rate, at its nominal rate. Without them every run shares one network (loopback on one host, whatever
  ``netns.sh`` set on the cluster), whose rate the study does not know: the link is taken as unlimited for the
  fit — the cost per message then carries what communication costs here — and at its nominal rate for the
  extrapolation, which says so.

A configuration whose strategy has no other configuration that communicates in the study cannot be predicted
with it left out (the constants are per strategy): it is listed as not predicted and left out of the median.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from training.strategy_rules import rules_of
from training.study import cost_model
from training.study.plan import BASELINE, CEILING, RUN

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from training.study.report import Row

EXTRAPOLATED_NODES = (8, 16, 64)
EXTRAPOLATED_LINKS = {"1 Gbit/s": 1.25e8, "10 Gbit/s": 1.25e9, "25 Gbit/s": 3.125e9}


@dataclass(frozen=True)
class StudyModel:
    """The model a study fitted, how well it predicted each configuration left out, and its extrapolation."""

    constants: cost_model.Constants | None
    # (row label, prediction with the row left out: ``predicted`` None if no other configuration of its strategy
    # communicates)
    predictions: tuple[tuple[str, cost_model.Prediction], ...]
    extrapolation: tuple[tuple[str, int, str, float, float], ...]  # (row label, nodes, link, samples/s, speedup)
    note: str  # one line: what was fitted, or why nothing was

    @property
    def median_error(self) -> float | None:
        errors = [p.relative_error for _, p in self.predictions if p.relative_error is not None]
        return statistics.median(errors) if errors else None


def compute_seconds_per_example_by_strategy(rows: Sequence[Row]) -> dict[tuple[str, int], float]:
    """Seconds one worker computes per example, by (strategy, threads per worker), from each strategy's ceiling:
    the strategies' worker loops differ (Downpour's ran 14 % faster than Horovod's on 2026-12-05's cluster)."""
    by_key: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        if row.role == CEILING:
            by_key.setdefault((row.strategy, _threads(row)), []).append(row.total_workers / row.samples_per_second)
    return {key: statistics.mean(values) for key, values in by_key.items()}


def compute_seconds_per_example(rows: Sequence[Row]) -> dict[int, float]:
    """Seconds one worker computes per example, by threads per worker: from the ceilings (every worker busy at
    once), else from the baseline for its thread count."""
    by_threads: dict[int, list[float]] = {}
    for row in rows:
        if row.role == CEILING:
            by_threads.setdefault(_threads(row), []).append(row.total_workers / row.samples_per_second)
    for row in rows:
        if row.role == BASELINE and _threads(row) not in by_threads:
            by_threads[_threads(row)] = [1 / row.samples_per_second]
    return {threads: statistics.mean(values) for threads, values in by_threads.items()}


def configuration_of(row: Row, link_bytes_per_second: float = math.inf) -> cost_model.Configuration:
    return cost_model.Configuration(
        row.strategy, workers=row.total_workers, parameters=max(1, row.parameters),
        batch_per_worker=row.batch_size_per_worker, link_bytes_per_second=link_bytes_per_second,
        threads_per_worker=_threads(row), n_push=row.n_push, n_fetch=max(1, row.n_fetch),
        steps_per_epoch=max(1, row.steps_per_epoch))


def link_bytes_per_second(row: Row) -> float:
    """The row's shaped link rate (e.g. 100mbit) in bytes per second."""
    from training.study.report import link_rate_bits

    return link_rate_bits(row.link_rate) / 8


def fit_study(rows: Sequence[Row]) -> StudyModel:
    """Fit the model to the study's communicating configurations and predict each one with it left out."""
    seconds_per_example = compute_seconds_per_example(rows)
    by_strategy = compute_seconds_per_example_by_strategy(rows)
    measured = [row for row in rows if row.role == RUN and _threads(row) in seconds_per_example
                and row.batch_size_per_worker > 0]
    if len(measured) < 2:
        return StudyModel(None, (), (), f"not fitted: {len(measured)} configuration(s) that communicate and have a "
                                         "ceiling or baseline with their threads; leaving one out needs 2")
    if not all(row.parameters > 0 for row in measured):
        return StudyModel(None, (), (), "not fitted: a run logged no model_parameters (its evaluate step did not "
                                         "run?)")
    shaped = len({row.link_rate for row in measured}) >= 2 and all(row.link_rate for row in measured)
    observations = [(configuration_of(row, link_bytes_per_second(row) if shaped else math.inf),
                     row.samples_per_second) for row in measured]
    constants = cost_model.fit(observations, seconds_per_example, by_strategy)
    left_out = cost_model.leave_one_out(observations, seconds_per_example, by_strategy)
    predictions = tuple((row.label, prediction) for row, prediction in zip(measured, left_out, strict=True))
    extrapolated = []
    shapes = {}
    for row in measured:  # one shape per strategy and n_push: the study's run of it with the most workers
        key = (row.strategy, row.n_push if rules_of(row.strategy).pushes_and_fetches else 0)
        if key not in shapes or row.total_workers > shapes[key].total_workers:
            shapes[key] = row
    for row in shapes.values():
        extrapolated += [(row.label, *entry) for entry in extrapolate(
            configuration_of(row), constants, row.steps_per_epoch * row.total_workers)]
    errors = [prediction.relative_error for prediction in left_out if prediction.relative_error is not None]
    links = (f"links at their {len({row.link_rate for row in measured})} shaped rates (nominal)" if shaped
             else "links unlimited, one network")
    unpredicted = [row.label for row, prediction in zip(measured, left_out, strict=True)
                   if prediction.predicted is None]
    checked = (f"leave-one-out median error {statistics.median(errors):.1%}, largest {max(errors):.1%}, over "
               f"{len(errors)} configuration(s)" if errors else "no configuration could be predicted leaving it out")
    if unpredicted:
        checked += (f"; not predicted: {', '.join(unpredicted)} (no other configuration of its strategy that "
                    "communicates)")
    note = f"fitted to {len(measured)} configurations of this study ({links}); {checked}"
    return StudyModel(constants, predictions, tuple(extrapolated), note)


def extrapolate(configuration: cost_model.Configuration, constants: cost_model.Constants, steps_per_epoch: int
                ) -> list[tuple[int, str, float, float]]:
    """(nodes, link, samples/s, speedup) at EXTRAPOLATED_NODES × EXTRAPOLATED_LINKS: model output. A node is one
    worker; Downpour's server sits on a node with the same link; an epoch's ``steps_per_epoch`` (all workers'
    together) are shared among the nodes (averaging's rounds spread over them)."""
    rows = []
    for nodes in EXTRAPOLATED_NODES:
        for link, rate in EXTRAPOLATED_LINKS.items():
            shaped = replace(configuration, server_link_bytes_per_second=rate,
                             steps_per_epoch=max(1, steps_per_epoch // nodes))
            [(_, _, samples, speedup)] = cost_model.extrapolate(shaped, constants, [nodes], [rate])
            rows.append((nodes, link, samples, speedup))
    return rows


def predictions_csv(model: StudyModel) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["configuration", "measured_samples_per_second", "predicted_left_out", "relative_error"])
    for label, prediction in model.predictions:
        if prediction.predicted is None:
            writer.writerow([label, f"{prediction.measured:.1f}", "not predicted", ""])
        else:
            writer.writerow([label, f"{prediction.measured:.1f}", f"{prediction.predicted:.1f}",
                             f"{prediction.relative_error:.4f}"])
    return buffer.getvalue()


def extrapolation_csv(model: StudyModel) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["configuration", "nodes", "link", "samples_per_second_model_output", "speedup_model_output"])
    for label, nodes, link, rate, speed in model.extrapolation:
        writer.writerow([label, nodes, link, f"{rate:.1f}", f"{speed:.3f}"])
    return buffer.getvalue()


def markdown(model: StudyModel) -> str:
    """The section the recommendation report carries: the fit, the errors per configuration, the extrapolation."""
    lines = ["## Cost model", "", model.note + "."]
    if model.constants is None:
        return "\n".join(lines) + "\n"
    constants = model.constants
    lines += ["", "Fitted: " + "; ".join(
        f"{strategy} overlap {constants.overlap.get(strategy, 0):.2f}"
        f"{' (fixed: asynchronous)' if strategy in cost_model.FIXED_OVERLAP else ''}, cost per message "
        f"{1000 * constants.message_seconds.get(strategy, 0):.2f} ms" for strategy in sorted(constants.overlap)) + ".",
        "", "| configuration (left out) | measured samples/s | predicted | error |", "|---|---|---|---|"]
    lines += [f"| {label} | {p.measured:,.0f} | {p.predicted:,.0f} | {p.relative_error:.1%} |"
              if p.predicted is not None and p.relative_error is not None
              else f"| {label} | {p.measured:,.0f} | not predicted: no other configuration of its strategy "
                   "communicates | |"
              for label, p in model.predictions]
    lines += ["", "**Model output, not measured** (nominal link rates; Downpour's server on a node with the same "
              "link): speedup over one worker that does not communicate.", "",
              "| configuration | " + " | ".join(f"{n} nodes, {link}" for n in EXTRAPOLATED_NODES
                                               for link in EXTRAPOLATED_LINKS) + " |",
              "|---" * (1 + len(EXTRAPOLATED_NODES) * len(EXTRAPOLATED_LINKS)) + "|"]
    by_label: dict[str, list[str]] = {}
    for label, _, _, _, speed in model.extrapolation:
        by_label.setdefault(label, []).append(f"{speed:.1f}×")
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in by_label.items()]
    return "\n".join(lines) + "\n"


def extrapolation_figure(speedups: dict[str, list[tuple[int, str, float]]], title: str) -> Figure:
    """Speedup against nodes, one panel per link rate, a line per configuration: ``speedups[name]`` holds
    (nodes, link, speedup) with the links of EXTRAPOLATED_LINKS. Titled as model output."""
    import matplotlib.ticker

    from training.evaluation.figures import _pyplot

    plt = _pyplot()
    figure, axes = plt.subplots(1, len(EXTRAPOLATED_LINKS), figsize=(13, 4), sharey=True)
    for axis, link in zip(axes, EXTRAPOLATED_LINKS, strict=True):
        axis.plot(EXTRAPOLATED_NODES, EXTRAPOLATED_NODES, color="grey", linestyle="--", label="linear")
        for name, rows in speedups.items():
            points = [(nodes, speed) for nodes, row_link, speed in rows if row_link == link]
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", label=name)
        axis.set(xscale="log", yscale="log", xlabel="nodes (1 worker each)", title=f"{link} links")
        axis.set_xticks(EXTRAPOLATED_NODES, [str(n) for n in EXTRAPOLATED_NODES])
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_yticks([1, 2, 4, 8, 16, 32, 64], ["1", "2", "4", "8", "16", "32", "64"])
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("speedup (model output)")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"{title}: MODEL OUTPUT, NOT MEASURED")
    figure.tight_layout()
    return figure


def study_extrapolation_figure(model: StudyModel, title: str) -> Figure:
    speedups: dict[str, list[tuple[int, str, float]]] = {}
    for label, nodes, link, _, speed in model.extrapolation:
        speedups.setdefault(label, []).append((nodes, link, speed))
    return extrapolation_figure(speedups, f"Cost model fitted to {title}, extrapolated")


def _threads(row: Row) -> int:
    return max(1, row.cores // row.total_workers)
