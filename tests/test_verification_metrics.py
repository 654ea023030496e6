"""Speaker-verification metrics against values computed by hand on small score sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.evaluation import verification

# Targets 0.8, 0.6, 0.4; non-targets 0.5, 0.3, 0.2, 0.1. By hand, accepting scores ≥ t:
#   t = 0.8: P_miss 2/3, P_fa 0     t = 0.6: 1/3, 0     t = 0.5: 1/3, 1/4     t = 0.4: 0, 1/4     t = 0.3: 0, 2/4
LABELS = np.array([1, 1, 1, 0, 0, 0, 0])
SCORES = np.array([0.8, 0.6, 0.4, 0.5, 0.3, 0.2, 0.1])


def test_equal_error_rate_of_a_hand_computed_set():
    # P_fa stays 1/4 from t = 0.5 to t = 0.4 while P_miss falls from 1/3 to 0: the rates are equal at 1/4.
    point = verification.equal_error_rate(LABELS, SCORES)
    assert point.value == pytest.approx(0.25)
    assert point.miss_rate == pytest.approx(point.false_alarm_rate)
    assert 0.4 <= point.threshold <= 0.5


def test_equal_error_rate_with_an_exact_crossing_and_for_separable_scores():
    # Targets 0.9, 0.3; non-targets 0.6, 0.1: at t = 0.6 P_miss = 1/2 and P_fa = 1/2.
    point = verification.equal_error_rate([1, 1, 0, 0], [0.9, 0.3, 0.6, 0.1])
    assert point.value == pytest.approx(0.5)
    assert verification.equal_error_rate([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]).value == 0.0
    assert verification.equal_error_rate([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]).value == 1.0


def test_minimum_dcf_at_two_priors_by_hand():
    # P_target = 0.5: cost / 0.5 = P_miss + P_fa, lowest at t = 0.4 (0 + 1/4).
    point = verification.minimum_dcf(LABELS, SCORES, p_target=0.5)
    assert (point.value, point.threshold) == (pytest.approx(0.25), pytest.approx(0.4))
    # P_target = 0.01: cost / 0.01 = P_miss + 99 P_fa, lowest at t = 0.6 (1/3 + 0).
    point = verification.minimum_dcf(LABELS, SCORES, p_target=0.01)
    assert (point.value, point.threshold) == (pytest.approx(1 / 3), pytest.approx(0.6))
    assert (point.miss_rate, point.false_alarm_rate) == (pytest.approx(1 / 3), 0.0)


def test_actual_dcf_decides_at_the_bayes_threshold():
    assert verification.bayes_threshold(0.5) == 0.0
    assert verification.bayes_threshold(0.01) == pytest.approx(math.log(99))
    llrs = np.array([3.0, 5.0, -1.0, 4.7, -2.0, -6.0, 0.0])  # targets: 3, 5, −1; non-targets: 4.7, −2, −6, 0
    labels = np.array([1, 1, 1, 0, 0, 0, 0])
    # P = 0.01: threshold log 99 ≈ 4.595: targets accepted 5 (miss 2/3), non-targets accepted 4.7 (fa 1/4);
    # cost = (0.01 · 2/3 + 0.99 · 1/4) / 0.01.
    point = verification.actual_dcf(labels, llrs, p_target=0.01)
    assert point.value == pytest.approx((0.01 * 2 / 3 + 0.99 / 4) / 0.01)
    assert point.value >= verification.minimum_dcf(labels, llrs, p_target=0.01).value


def test_cllr_by_hand():
    assert verification.cllr([1, 0], [0.0, 0.0]) == pytest.approx(1.0)  # always "don't know": one bit
    # log2(1 + e^-2) for the target and log2(1 + e^-2) for the non-target at −2: both ≈ 0.18265.
    assert verification.cllr([1, 0], [2.0, -2.0]) == pytest.approx(math.log2(1 + math.exp(-2)))
    assert verification.cllr([1, 0], [50.0, -50.0]) < 1e-6


@pytest.mark.parametrize(("labels", "scores", "message"), [
    ([1, 1], [0.1, 0.2], "at least one target and one non-target"),
    ([1, 2], [0.1, 0.2], r"0 \(non-target\) or 1"),
    ([1, 0], [0.1, float("nan")], "finite"),
    ([1, 0, 1], [0.1, 0.2], "alike"),
])
def test_bad_trials_are_refused_by_name(labels, scores, message):
    with pytest.raises(ValueError, match=message):
        verification.equal_error_rate(labels, scores)


def test_bad_costs_are_refused():
    with pytest.raises(ValueError, match="p_target"):
        verification.minimum_dcf(LABELS, SCORES, p_target=1.0)
    with pytest.raises(ValueError, match="c_miss"):
        verification.minimum_dcf(LABELS, SCORES, p_target=0.1, c_miss=0)


def simulated_trials(speakers: int, separation: float, seed: int) -> tuple[np.ndarray, ...]:
    """Per enrolled speaker, 10 target and 40 non-target trials; some speakers are harder to recognise than others
    (their target scores share an offset), so trials of one speaker are correlated, as in real evaluations."""
    rng = np.random.default_rng(seed)
    labels, scores, owners = [], [], []
    for speaker in range(speakers):
        difficulty = rng.normal(0, 1.0)
        labels += [1] * 10 + [0] * 40
        scores += list(rng.normal(separation + difficulty, 1, 10)) + list(rng.normal(0, 1, 40))
        owners += [speaker] * 50
    return np.array(labels), np.array(scores), np.array(owners)


def eer_value(labels: np.ndarray, scores: np.ndarray) -> float:
    return verification.equal_error_rate(labels, scores).value


def test_the_bootstrap_over_speakers_covers_the_estimate_and_is_wider_than_over_trials():
    labels, scores, speakers = simulated_trials(60, 2.0, seed=1)
    estimate = eer_value(labels, scores)
    low, high = verification.bootstrap_interval(labels, scores, speakers, eer_value, resamples=200, seed=0)
    assert low < estimate < high
    trial_low, trial_high = verification.bootstrap_interval(labels, scores, np.arange(len(labels)), eer_value,
                                                            resamples=200, seed=0)
    assert high - low > trial_high - trial_low  # correlated trials: the speaker interval is the honest, wider one
    again = verification.bootstrap_interval(labels, scores, speakers, eer_value, resamples=200, seed=0)
    assert again == (low, high)


def test_the_paired_difference_excludes_zero_only_when_one_system_is_better():
    labels, scores, speakers = simulated_trials(60, 2.0, seed=2)
    rng = np.random.default_rng(3)
    better = scores + labels * 1.5  # targets pushed up: a clearly better system
    difference, low, high = verification.paired_bootstrap_difference(labels, better, scores, speakers, eer_value,
                                                                     resamples=200)
    assert difference < 0 and high < 0
    same = scores + rng.normal(0, 0.01, len(scores))
    difference, low, high = verification.paired_bootstrap_difference(labels, same, scores, speakers, eer_value,
                                                                     resamples=200)
    assert low <= 0 <= high
