"""Enrollment, cosine scoring, score normalisation and fusion against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from training.evaluation import scoring, verification


def test_enrollment_is_the_normalised_mean_of_normalised_embeddings():
    model = scoring.enroll(np.array([[3.0, 0.0], [0.0, 0.5]]))  # → (1, 0) and (0, 1) → mean (½, ½) → (1, 1)/√2
    np.testing.assert_allclose(model, [2 ** -0.5, 2 ** -0.5])
    with pytest.raises(ValueError, match="at least one embedding"):
        scoring.enroll(np.zeros((0, 4)))


def test_cosine_scores_follow_the_trial_indices():
    models = np.array([[1.0, 0.0], [0.0, 2.0]])
    tests = np.array([[1.0, 1.0], [0.0, -3.0]])
    scores = scoring.cosine_scores(models, tests, [0, 1, 1], [0, 0, 1])
    np.testing.assert_allclose(scores, [2 ** -0.5, 2 ** -0.5, -1.0])


def test_cohort_statistics_over_all_and_over_the_top_k_by_hand():
    embeddings = np.array([[1.0, 0.0]])
    cohort = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 1.0]])  # cosines 1, 0, −1, 1/√2
    mean, std = scoring.cohort_statistics(embeddings, cohort)
    assert mean[0] == pytest.approx((1 + 0 - 1 + 2 ** -0.5) / 4)
    mean, std = scoring.cohort_statistics(embeddings, cohort, top=2)  # the two most similar: 1 and 1/√2
    assert mean[0] == pytest.approx((1 + 2 ** -0.5) / 2)
    assert std[0] == pytest.approx(np.std([1, 2 ** -0.5]))
    with pytest.raises(ValueError, match="top must be in"):
        scoring.cohort_statistics(embeddings, cohort, top=5)


def test_symmetric_normalisation_by_hand():
    scores = np.array([0.8])
    normalised = scoring.symmetric_normalisation(scores, (np.array([0.2]), np.array([0.1])),
                                                 (np.array([0.4]), np.array([0.2])), [0], [0])
    assert normalised[0] == pytest.approx(0.5 * ((0.8 - 0.2) / 0.1 + (0.8 - 0.4) / 0.2))  # ½ (6 + 2) = 4


def gaussian_trials(count: int, target_mean: float, seed: int, prior: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(count) < prior).astype(int)
    return rng.normal(np.where(labels == 1, target_mean, 0.0), 1.0), labels


def test_fusion_of_one_gaussian_system_recovers_its_true_llr_at_any_training_prior():
    # Targets N(2, 1), non-targets N(0, 1): the true LLR is 2x − 2, whatever share of targets the trials hold.
    scores, labels = gaussian_trials(200_000, 2.0, seed=0, prior=0.1)
    for prior in (0.01, 0.5):
        fusion = scoring.train_fusion(scores, labels, prior=prior)
        assert fusion.weights[0] == pytest.approx(2.0, abs=0.05)
        assert fusion.offset == pytest.approx(-2.0, abs=0.05)
    # Calibrated LLRs cost what minimum DCF says, nearly.
    llrs = scoring.train_fusion(scores, labels, prior=0.5).llr(scores)
    actual = verification.actual_dcf(labels, llrs, p_target=0.05).value
    assert actual == pytest.approx(verification.minimum_dcf(labels, llrs, p_target=0.05).value, abs=0.02)
    assert verification.cllr(labels, llrs) < verification.cllr(labels, scores * 10)  # badly scaled: higher cost


def test_fusing_two_independent_systems_beats_either():
    rng = np.random.default_rng(1)
    labels = (rng.random(20_000) < 0.2).astype(int)
    first = rng.normal(np.where(labels == 1, 1.5, 0.0), 1.0)
    second = rng.normal(np.where(labels == 1, 1.0, 0.0), 1.0) * 5 + 3  # another scale and offset
    both = np.stack([first, second], axis=1)
    fusion = scoring.train_fusion(both, labels)
    fused_eer = verification.equal_error_rate(labels, fusion.llr(both)).value
    assert fused_eer < min(verification.equal_error_rate(labels, first).value,
                           verification.equal_error_rate(labels, second).value)
    equal = scoring.equal_weight_fusion(both)
    z_scored = (both - both.mean(axis=0)) / both.std(axis=0)
    np.testing.assert_allclose(equal.llr(both), z_scored.mean(axis=1), atol=1e-9)
    with pytest.raises(ValueError, match="2 score columns for a fusion of 1"):
        scoring.train_fusion(first, labels).llr(both)


def test_fusion_refuses_trials_without_both_kinds():
    with pytest.raises(ValueError, match="target \\(1\\) and non-target \\(0\\)"):
        scoring.train_fusion(np.array([0.1, 0.2]), np.array([1, 1]))
