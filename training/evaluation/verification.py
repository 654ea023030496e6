"""Speaker-verification metrics: EER, minimum and actual detection cost, Cllr, and bootstrap confidence intervals
over speakers. Pure functions of score arrays (scikit-learn's ``roc_curve`` for the error curve).

Conventions: a *trial* compares an enrolled speaker's model with a test utterance; ``labels`` are 1 for target
trials (same speaker) and 0 for non-target trials; higher scores mean "more likely the same speaker". Detection
costs follow NIST SRE: DCF(t) = C_miss · P_target · P_miss(t) + C_fa · (1 − P_target) · P_fa(t), normalised by
the cost of the better trivial system, min(C_miss · P_target, C_fa · (1 − P_target)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OperatingPoint:
    """A threshold and the error rates at it: decide "target" when score ≥ threshold."""

    threshold: float
    miss_rate: float
    false_alarm_rate: float
    value: float  # the metric at this point (the EER, or the normalised DCF)


def _checked(labels: np.ndarray | Sequence[int], scores: np.ndarray | Sequence[float]) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    labels, scores = np.asarray(labels), np.asarray(scores, np.float64)
    if labels.shape != scores.shape or labels.ndim != 1:
        raise ValueError(f"labels {labels.shape} and scores {scores.shape} must be one-dimensional and alike")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be 0 (non-target) or 1 (target)")
    if not (labels == 1).any() or not (labels == 0).any():
        raise ValueError("need at least one target and one non-target trial")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    return labels.astype(np.int64), scores


def error_rates(labels: np.ndarray | Sequence[int], scores: np.ndarray | Sequence[float]) -> tuple[np.ndarray,
                                                                                                     np.ndarray,
                                                                                                     np.ndarray]:
    """(P_miss, P_fa, thresholds) at every distinct score used as the threshold, thresholds descending, plus the
    point that accepts nothing first (P_miss = 1, P_fa = 0, threshold +inf)."""
    from sklearn.metrics import roc_curve

    labels, scores = _checked(labels, scores)
    false_alarm, hit, thresholds = roc_curve(labels, scores, drop_intermediate=False)
    return 1.0 - hit, false_alarm, thresholds


def equal_error_rate(labels: np.ndarray | Sequence[int], scores: np.ndarray | Sequence[float]) -> OperatingPoint:
    """The rate where misses and false alarms are equal, linearly interpolated between the two neighbouring
    thresholds of the empirical curve (where P_miss − P_fa changes sign); its threshold interpolated likewise."""
    miss, false_alarm, thresholds = error_rates(labels, scores)
    difference = miss - false_alarm  # decreasing from 1 (accept nothing) to −1 (accept everything)
    crossing = int(np.argmax(difference <= 0))
    if difference[crossing] == 0:  # a threshold with equal rates (never the first point: it misses everything)
        return OperatingPoint(float(thresholds[crossing]), float(miss[crossing]), float(false_alarm[crossing]),
                              float(miss[crossing]))
    before, after = crossing - 1, crossing
    # Where the straight line between the two points crosses P_miss = P_fa.
    share = difference[before] / (difference[before] - difference[after])
    rate = miss[before] + share * (miss[after] - miss[before])
    upper = thresholds[before] if np.isfinite(thresholds[before]) else thresholds[after]
    threshold = upper + share * (thresholds[after] - upper)
    return OperatingPoint(float(threshold), float(rate), float(rate), float(rate))


def _dcf_normaliser(p_target: float, c_miss: float, c_fa: float) -> float:
    if not 0 < p_target < 1:
        raise ValueError(f"p_target must be in (0, 1), got {p_target}")
    if c_miss <= 0 or c_fa <= 0:
        raise ValueError("c_miss and c_fa must be > 0")
    return min(c_miss * p_target, c_fa * (1 - p_target))


def minimum_dcf(labels: np.ndarray | Sequence[int], scores: np.ndarray | Sequence[float], p_target: float,
                c_miss: float = 1.0, c_fa: float = 1.0) -> OperatingPoint:
    """The lowest normalised detection cost over every threshold, and the threshold that reaches it."""
    miss, false_alarm, thresholds = error_rates(labels, scores)
    costs = (c_miss * p_target * miss + c_fa * (1 - p_target) * false_alarm) / _dcf_normaliser(p_target, c_miss,
                                                                                                c_fa)
    best = int(np.argmin(costs))
    return OperatingPoint(float(thresholds[best]), float(miss[best]), float(false_alarm[best]), float(costs[best]))


def bayes_threshold(p_target: float, c_miss: float = 1.0, c_fa: float = 1.0) -> float:
    """The log-likelihood-ratio threshold a calibrated system uses: log(C_fa (1 − P) / (C_miss P))."""
    _dcf_normaliser(p_target, c_miss, c_fa)
    return float(np.log(c_fa * (1 - p_target) / (c_miss * p_target)))


def actual_dcf(labels: np.ndarray | Sequence[int], llrs: np.ndarray | Sequence[float], p_target: float,
               c_miss: float = 1.0, c_fa: float = 1.0) -> OperatingPoint:
    """The normalised cost of deciding with calibrated log-likelihood ratios at the Bayes threshold (accept when
    LLR ≥ threshold): what a calibrated system really costs, ≥ minimum_dcf."""
    labels, llrs = _checked(labels, llrs)
    threshold = bayes_threshold(p_target, c_miss, c_fa)
    accepted = llrs >= threshold
    miss = float(np.mean(~accepted[labels == 1]))
    false_alarm = float(np.mean(accepted[labels == 0]))
    cost = (c_miss * p_target * miss + c_fa * (1 - p_target) * false_alarm) / _dcf_normaliser(p_target, c_miss,
                                                                                              c_fa)
    return OperatingPoint(threshold, miss, false_alarm, float(cost))


def cllr(labels: np.ndarray | Sequence[int], llrs: np.ndarray | Sequence[float]) -> float:
    """The log-likelihood-ratio cost (Brümmer): ½ [mean log2(1 + e^−LLR) over targets + mean log2(1 + e^LLR)
    over non-targets], in bits; 1 for a system that always says LLR = 0, 0 for a perfect one."""
    labels, llrs = _checked(labels, llrs)
    targets, non_targets = llrs[labels == 1], llrs[labels == 0]
    return float(0.5 * (np.mean(np.logaddexp(0, -targets)) + np.mean(np.logaddexp(0, non_targets))) / np.log(2))


def bootstrap_interval(labels: np.ndarray, scores: np.ndarray, speakers: np.ndarray,
                       metric: Callable[[np.ndarray, np.ndarray], float], resamples: int = 500, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """A percentile confidence interval of ``metric(labels, scores)`` with speakers as the unit: each resample
    draws the enrolled speakers with replacement and keeps every trial of each draw (trials of one speaker are
    not independent, so resampling trials would make the interval too narrow). Resamples without both kinds of
    trial are drawn again."""
    labels, scores, speakers = np.asarray(labels), np.asarray(scores), np.asarray(speakers)
    if not len(labels) == len(scores) == len(speakers):
        raise ValueError("labels, scores and speakers must have one entry per trial")
    if resamples < 10:
        raise ValueError(f"resamples must be ≥ 10, got {resamples}")
    names, trial_speaker = np.unique(speakers, return_inverse=True)
    trials_of = [np.flatnonzero(trial_speaker == number) for number in range(len(names))]
    rng = np.random.default_rng(seed)
    values: list[float] = []
    attempts = 0
    while len(values) < resamples:
        attempts += 1
        if attempts > 20 * resamples:
            raise ValueError("too few speakers with both target and non-target trials to bootstrap")
        chosen = np.concatenate([trials_of[number] for number in rng.integers(0, len(names), len(names))])
        drawn = labels[chosen]
        if (drawn == 1).any() and (drawn == 0).any():
            values.append(metric(drawn, scores[chosen]))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def paired_bootstrap_difference(labels: np.ndarray, first: np.ndarray, second: np.ndarray, speakers: np.ndarray,
                                metric: Callable[[np.ndarray, np.ndarray], float], resamples: int = 500,
                                seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(metric(first) − metric(second), and its confidence interval) from the same speaker resamples for both
    systems, so the interval is of the difference itself: it excludes 0 when one system is reliably better."""
    labels, first, second = np.asarray(labels), np.asarray(first), np.asarray(second)
    stacked = np.stack([first, second], axis=1)

    def difference(drawn_labels: np.ndarray, drawn: np.ndarray) -> float:
        return metric(drawn_labels, drawn[:, 0]) - metric(drawn_labels, drawn[:, 1])

    low, high = bootstrap_interval(labels, stacked, speakers, difference, resamples, seed, level)
    return difference(labels, stacked), low, high
