"""A communication cost model of one training step, per strategy: pure functions, no I/O.

A worker's step is its compute, the work each message costs it, and the time on the wire its compute does not
hide::

    compute   = batch × seconds_per_example(strategy, threads per worker)
    wire      = bytes per step / (efficiency × link rate) + messages per step × latency
    step      = compute + messages per step × cost per message + max(0, wire − overlap × compute)
    samples/s = workers × batch / step

Bytes a worker sends per step (P parameters of 4 bytes; fp16 compression halves an all-reduce's), by the
communication pattern each strategy declares (training.strategy_rules):

    all-reduce        2(N−1)/N × 4P          ring all-reduce of N workers, every step (horovod)
    parameter-server  4P/n_push + 4P/n_fetch  its pushes and fetches, through its link to the server (whose own
                                              link carries N times that: the slower of the two bounds the step;
                                              downpour)
    rounds            2 × 4P × R / S          weights down and up once per round (R rounds in S steps per epoch;
                                              averaging)

The cost per message is work on the worker's own cores (Horovod negotiating and reducing each collective, the
Downpour client serialising a push, a Spark job per averaging round), so no compute hides it; only time spent
waiting on the wire can overlap compute. What a study fits from its own runs (:func:`fit`), per strategy: that
``cost per message`` and the ``overlap`` (0: none; 1: the wire is hidden while it takes no longer than the
compute). An asynchronous strategy's overlap (Downpour's) is not fitted but 1, by design: its client fetches and
pushes on a thread of its own while the worker goes on computing. Compute per example comes from runs that do not
communicate, all hosts busy at once — each strategy's own ceiling where the study ran one (their worker loops
differ), else any ceiling with the same threads — since one process alone runs faster than it does beside others.
The link's ``efficiency`` is an input, 1 (the nominal rate) unless told: fitted alongside the rest it traded off
against the overlaps (anywhere from 0.26 to 1.00 on the cluster studies of 2026-12-03 and 2026-12-05), and taking
it as 1 left each of those studies' median leave-one-out error the same and its largest error no larger.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from training.settings import STRATEGIES
from training.strategy_rules import ALL_REDUCE, PARAMETER_SERVER, RULES, rules_of

BYTES_PER_PARAMETER = 4  # float32


@dataclass(frozen=True)
class Configuration:
    """One training configuration, as much of it as its step time depends on."""

    strategy: str
    workers: int  # nodes × workers_per_node
    parameters: int
    batch_per_worker: int
    link_bytes_per_second: float  # each worker's link (nominal rate)
    threads_per_worker: int = 1
    n_push: int = 4
    n_fetch: int = 4
    rounds_per_epoch: int = 4
    steps_per_epoch: int = 1  # a worker's steps per epoch (averaging's rounds are spread over them)
    fp16_compression: bool = False
    latency_seconds: float = 0.0
    # Downpour's server (every shard in the Spark driver) takes all N workers' pushes and fetches through its one
    # link. On the namespace cluster the driver's side is not shaped (inf); a real cluster's driver node has a
    # link like the others, and at 64 workers that link, not the workers', bounds the step.
    server_link_bytes_per_second: float = math.inf

    @property
    def communication(self) -> str:
        """How this strategy's workers communicate (training.strategy_rules)."""
        return rules_of(self.strategy).communication

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        for name in ("workers", "parameters", "batch_per_worker", "threads_per_worker", "n_push", "n_fetch",
                     "rounds_per_epoch", "steps_per_epoch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not self.link_bytes_per_second > 0 or not self.server_link_bytes_per_second > 0 \
                or self.latency_seconds < 0:
            raise ValueError("the link needs a positive rate and a latency ≥ 0")


@dataclass(frozen=True)
class Constants:
    """What the model is fitted with: compute per example by threads per worker, link efficiency, overlaps."""

    seconds_per_example: dict[int, float]  # by threads per worker
    efficiency: float = 1.0
    overlap: dict[str, float] = field(default_factory=dict)
    message_seconds: dict[str, float] = field(default_factory=dict)
    # by (strategy, threads per worker), from that strategy's own ceiling; ahead of seconds_per_example
    strategy_seconds_per_example: dict[tuple[str, int], float] = field(default_factory=dict)

    def compute_seconds(self, configuration: Configuration) -> float:
        threads = configuration.threads_per_worker
        own = self.strategy_seconds_per_example.get((configuration.strategy, threads))
        if own is not None:
            return configuration.batch_per_worker * own
        if threads not in self.seconds_per_example:
            raise ValueError(f"no compute measurement for {threads} thread(s) per worker (have "
                             f"{sorted(self.seconds_per_example)})")
        return configuration.batch_per_worker * self.seconds_per_example[threads]


def bytes_per_step(configuration: Configuration) -> float:
    """Bytes one worker sends per step (what it receives is the same amount)."""
    weights = BYTES_PER_PARAMETER * configuration.parameters
    workers = configuration.workers
    if configuration.communication == ALL_REDUCE:
        ring = 2 * (workers - 1) / workers * weights
        return ring / 2 if configuration.fp16_compression else ring
    if configuration.communication == PARAMETER_SERVER:
        return weights / configuration.n_push + weights / configuration.n_fetch
    return 2 * weights * configuration.rounds_per_epoch / configuration.steps_per_epoch


def messages_per_step(configuration: Configuration) -> float:
    """Round trips per step that each pay the link's latency."""
    if configuration.communication == ALL_REDUCE:
        return 2 * (configuration.workers - 1)  # the ring's reduce-scatter and all-gather
    if configuration.communication == PARAMETER_SERVER:
        return 1 / configuration.n_push + 1 / configuration.n_fetch
    return 2 * configuration.rounds_per_epoch / configuration.steps_per_epoch


def communicates(configuration: Configuration) -> bool:
    return not (configuration.communication == ALL_REDUCE and configuration.workers == 1)  # a ring of one


def wire_seconds(configuration: Configuration, constants: Constants) -> float:
    """Seconds a worker's step waits on the wire (bytes and latency), none of it hidden."""
    if not communicates(configuration):
        return 0.0
    rate = constants.efficiency * configuration.link_bytes_per_second
    on_the_wire = bytes_per_step(configuration) / rate
    if configuration.communication == PARAMETER_SERVER:  # the server's link carries every worker's share at once
        server = constants.efficiency * configuration.server_link_bytes_per_second
        on_the_wire = max(on_the_wire, configuration.workers * bytes_per_step(configuration) / server)
    return on_the_wire + messages_per_step(configuration) * configuration.latency_seconds


def message_work_seconds(configuration: Configuration, constants: Constants) -> float:
    """Seconds a worker's step spends on its messages' own work (never hidden)."""
    if not communicates(configuration):
        return 0.0
    return messages_per_step(configuration) * constants.message_seconds.get(configuration.strategy, 0.0)


def step_seconds(configuration: Configuration, constants: Constants) -> float:
    compute = constants.compute_seconds(configuration)
    overlap = constants.overlap.get(configuration.strategy, FIXED_OVERLAP.get(configuration.strategy, 0.0))
    return (compute + message_work_seconds(configuration, constants)
            + max(0.0, wire_seconds(configuration, constants) - overlap * compute))


def samples_per_second(configuration: Configuration, constants: Constants) -> float:
    return configuration.workers * configuration.batch_per_worker / step_seconds(configuration, constants)


def speedup(configuration: Configuration, constants: Constants) -> float:
    """Over one worker with the same threads and batch that does not communicate."""
    alone = configuration.batch_per_worker / constants.compute_seconds(configuration)
    return samples_per_second(configuration, constants) / alone


Observation = tuple[Configuration, float]  # a configuration and its measured samples/s


def _squared_error(observations: Sequence[Observation], constants: Constants) -> float:
    return sum((samples_per_second(c, constants) / measured - 1) ** 2 for c, measured in observations)


# Grids of the fit: a cost per message from none through 1 µs … 1 s (geometric, 5 per decade).
OVERLAPS = tuple(i / 20 for i in range(21))
MESSAGE_SECONDS = (0.0, *(10 ** (exponent / 5) for exponent in range(-30, 1)))


# An asynchronous strategy's client (Downpour's) fetches and pushes on a thread of its own while the worker
# computes, so its wire time hides behind the compute by design: not a constant to fit.
FIXED_OVERLAP = {rules.name: 1.0 for rules in RULES if rules.asynchronous}


def fit(observations: Sequence[Observation], seconds_per_example: dict[int, float],
        strategy_seconds_per_example: dict[tuple[str, int], float] | None = None, efficiency: float = 1.0,
        overlaps: Iterable[float] = OVERLAPS, message_seconds: Iterable[float] = MESSAGE_SECONDS) -> Constants:
    """Per strategy, the cost per message and overlap (unless fixed, :data:`FIXED_OVERLAP`) that minimise the
    squared relative error of the predicted samples/s, the link at ``efficiency`` × its rate.

    A grid search; each strategy's pair is chosen on its own observations (strategies do not interact), so the
    cost is overlaps × message costs × observations."""
    if not observations:
        raise ValueError("nothing to fit: no observations")
    by_strategy = dict(strategy_seconds_per_example or {})
    chosen: dict[str, tuple[float, float]] = {}
    for strategy in sorted({configuration.strategy for configuration, _ in observations}):
        mine = [o for o in observations if o[0].strategy == strategy]
        allowed = (FIXED_OVERLAP[strategy],) if strategy in FIXED_OVERLAP else tuple(overlaps)
        pairs = [(overlap, cost) for overlap in allowed for cost in message_seconds]
        chosen[strategy] = min(pairs, key=lambda pair: _squared_error(mine, Constants(
            seconds_per_example, efficiency, {strategy: pair[0]}, {strategy: pair[1]}, by_strategy)))
    return Constants(seconds_per_example, efficiency, {strategy: pair[0] for strategy, pair in chosen.items()},
                     {strategy: pair[1] for strategy, pair in chosen.items()}, by_strategy)


@dataclass(frozen=True)
class Prediction:
    configuration: Configuration
    measured: float
    predicted: float | None  # None: not predictable from the others (:func:`predictable`)

    @property
    def relative_error(self) -> float | None:
        return None if self.predicted is None else abs(self.predicted - self.measured) / self.measured


def predictable(configuration: Configuration, others: Sequence[Observation]) -> bool:
    """Whether the others hold what predicting this configuration needs: a configuration of its strategy that
    communicates (the model's constants are per strategy; without one it would predict the ceiling)."""
    return not communicates(configuration) or any(
        other.strategy == configuration.strategy and communicates(other) for other, _ in others)


def leave_one_out(observations: Sequence[Observation], seconds_per_example: dict[int, float],
                  strategy_seconds_per_example: dict[tuple[str, int], float] | None = None,
                  efficiency: float = 1.0) -> list[Prediction]:
    """Each observation predicted by the model fitted to all the others; ``predicted`` is None where they cannot
    predict it (:func:`predictable`)."""
    if len(observations) < 2:
        raise ValueError("leave-one-out needs at least 2 observations")
    predictions = []
    for index, (configuration, measured) in enumerate(observations):
        others = [o for position, o in enumerate(observations) if position != index]
        if not predictable(configuration, others):
            predictions.append(Prediction(configuration, measured, None))
            continue
        constants = fit(others, seconds_per_example, strategy_seconds_per_example, efficiency)
        predictions.append(Prediction(configuration, measured, samples_per_second(configuration, constants)))
    return predictions


def median_error(predictions: Sequence[Prediction]) -> float:
    """The median relative error of the predictions that were made (nan if none was)."""
    return median([p.relative_error for p in predictions if p.relative_error is not None])


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def extrapolate(configuration: Configuration, constants: Constants, workers: Sequence[int],
                link_rates: Sequence[float]) -> list[tuple[int, float, float, float]]:
    """(workers, link bytes/s, samples/s, speedup) for each pair: model output, not a measurement."""
    rows = []
    for count in workers:
        for rate in link_rates:
            scaled = replace(configuration, workers=count, link_bytes_per_second=rate)
            rows.append((count, rate, samples_per_second(scaled, constants), speedup(scaled, constants)))
    return rows
