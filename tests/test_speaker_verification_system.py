"""The verification system from embeddings to metrics (training.workloads.speaker_verification.report): scores against
hand-computed cosines and S-norm, fusion trained on development trials only, and fusion of two systems with
independent errors beating each of them."""

from __future__ import annotations

import numpy as np
import pytest

from training.evaluation import scoring
from training.speech.trials import CONDITIONS, Clips, make_trials
from training.workloads.speaker_verification import report as sv

WORDS = ("yes", "no", "up", "down", "left", "right")


def corpus(speakers: int = 60, repetitions: int = 2, dimensions: int = 16, noise: float = 0.9, seed: int = 0):
    """Speakers with a centre each; two 'systems' see it through independent noise, so each errs on other clips."""
    rng = np.random.default_rng(seed)
    names = [f"spk{number:03d}" for number in range(speakers)]
    centres = rng.normal(size=(speakers, dimensions))
    rows = [(name, word) for name in names for word in WORDS for _ in range(repetitions)]
    speaker = np.array([name for name, _ in rows], dtype=object)
    index = np.array([names.index(name) for name, _ in rows])
    clips = Clips(speaker=speaker, word=np.array([word for _, word in rows], dtype=object),
                  family=np.array([f"engine/{int(name[3:]) % 3}" for name, _ in rows], dtype=object),
                  digest=np.array([f"clip{row}" for row in range(len(rows))], dtype=object))
    systems = {name: centres[index] + noise * rng.normal(size=(len(rows), dimensions)) for name in ("a", "b")}
    return names, clips, systems


@pytest.fixture(scope="module")
def evaluated():
    names, clips, systems = corpus()
    train, dev, evaluation_speakers = names[:20], names[20:40], names[40:]
    development = make_trials(clips, dev, 3, seed=1)
    evaluation = make_trials(clips, evaluation_speakers, 3, seed=2)
    report = sv.evaluate_systems(systems, clips.speaker, train, development, evaluation, resamples=30, seed=0)
    return names, clips, systems, development, evaluation, report


def test_raw_scores_are_cosines_of_the_enrolled_mean_and_s_norm_follows_its_formula():
    names, clips, systems = corpus(speakers=8)
    trials = make_trials(clips, names[4:], 2, seed=0)
    embeddings = systems["a"]
    cohort = sv.speaker_cohort(embeddings, clips.speaker, names[:4])
    scores = sv.score_trials(embeddings, trials, cohort)
    for trial in (0, len(trials.label) // 2, len(trials.label) - 1):
        enrolled = embeddings[trials.enrollment[trials.model_speaker[trial]]]
        enrolled = enrolled / np.linalg.norm(enrolled, axis=1, keepdims=True)
        model = enrolled.mean(axis=0) / np.linalg.norm(enrolled.mean(axis=0))
        test = embeddings[trials.test_clip[trial]] / np.linalg.norm(embeddings[trials.test_clip[trial]])
        assert scores.raw[trial] == pytest.approx(model @ test, abs=1e-12)
        cohort_unit = cohort / np.linalg.norm(cohort, axis=1, keepdims=True)
        model_side, test_side = cohort_unit @ model, cohort_unit @ test
        expected = 0.5 * ((model @ test - model_side.mean()) / model_side.std()
                          + (model @ test - test_side.mean()) / test_side.std())
        assert scores.normalised[trial] == pytest.approx(expected, abs=1e-9)


def test_the_cohort_is_one_enrolled_vector_per_speaker_and_refuses_a_speaker_without_clips():
    names, clips, systems = corpus(speakers=5)
    cohort = sv.speaker_cohort(systems["a"], clips.speaker, names[:3])
    assert cohort.shape == (3, 16)
    np.testing.assert_allclose(cohort[1], scoring.enroll(systems["a"][clips.speaker == names[1]]))
    with pytest.raises(ValueError, match="cohort speaker"):
        sv.speaker_cohort(systems["a"], clips.speaker, ["nobody"])


def test_every_system_and_both_fusions_are_measured_on_every_condition(evaluated):
    *_, evaluation, report = evaluated
    assert set(report.metrics) == {"a", "b", sv.EQUAL_WEIGHT, sv.FUSION}
    for system, by_condition in report.metrics.items():
        assert set(by_condition) == set(CONDITIONS), system
        for condition, metrics in by_condition.items():
            assert 0 <= metrics["eer"] <= 0.5
            assert metrics["eer_ci_low"] <= metrics["eer_ci_high"]
            for name in ("p01", "p05"):
                # A calibrated system's actual cost is its minimum cost plus what calibration misses.
                assert metrics[f"act_dcf_{name}"] >= metrics[f"min_dcf_{name}"] - 1e-9, (system, condition)
            assert metrics["cllr"] > 0
    assert report.counts == {condition: evaluation.counts()[condition] for condition in CONDITIONS}
    flat = report.flat_metrics()
    assert flat["eer_logistic_fusion_different_word"] == report.metrics[sv.FUSION]["different_word"]["eer"]
    assert "min_dcf_p01_threshold_a_hard" in flat and "fusion_eer_gain_all_ci_high" in flat
    assert flat["trials_all_targets"] == evaluation.counts()["all"]["targets"]


def test_fusing_two_systems_with_independent_errors_beats_each_of_them(evaluated):
    *_, report = evaluated
    fused = report.metrics[sv.FUSION]["all"]["eer"]
    assert fused < min(report.metrics["a"]["all"]["eer"], report.metrics["b"]["all"]["eer"])
    gain = report.differences["all"]
    assert gain["difference"] < 0 and gain["ci_low"] <= gain["difference"] <= gain["ci_high"]


def test_fusion_and_calibration_learn_from_the_development_trials_only(evaluated):
    names, clips, systems, development, evaluation, report = evaluated
    # The same development trials with other evaluation speakers: the same fusion.
    other_evaluation = make_trials(clips, names[40:55], 3, seed=5)
    other = sv.evaluate_systems(systems, clips.speaker, names[:20], development, other_evaluation, resamples=10)
    assert other.fusion == report.fusion
    # And it is the prior-weighted logistic regression of the development trials' S-norm scores (natural mix).
    natural = development.condition("all")
    columns = []
    for name in ("a", "b"):
        cohort = sv.speaker_cohort(systems[name], clips.speaker, names[:20])
        columns.append(sv.score_trials(systems[name], development, cohort).normalised[natural])
    expected = scoring.train_fusion(np.stack(columns, axis=1), development.label[natural], sv.FUSION_PRIOR)
    assert report.fusion[sv.FUSION] == expected.to_mapping()


def test_one_system_is_calibrated_but_not_fused():
    names, clips, systems = corpus(speakers=30)
    development = make_trials(clips, names[10:20], 3, seed=1)
    evaluation = make_trials(clips, names[20:], 3, seed=2)
    report = sv.evaluate_systems({"a": systems["a"]}, clips.speaker, names[:10], development, evaluation,
                                 resamples=10)
    assert set(report.metrics) == {"a"} and report.differences == {}
    with pytest.raises(ValueError, match="no embedding system"):
        sv.evaluate_systems({}, clips.speaker, names[:10], development, evaluation)


def test_det_curves_and_score_histograms_are_png(evaluated):
    *_, evaluation, report = evaluated
    assert sv.det_curves_png(report, evaluation, "different_word", "eval").startswith(b"\x89PNG")
    assert sv.score_histograms_png(report, "eval").startswith(b"\x89PNG")


def test_p_target_names_have_no_dots():
    assert sv.p_target_name(0.01) == "p01" and sv.p_target_name(0.05) == "p05"


def small_trials():
    from training.speech.trials import Clips, make_trials

    speakers = [f"{number:08x}" for number in range(4) for _ in range(5)]
    words = ["yes", "no", "up", "down", "left"] * 4
    clips = Clips(speaker=np.array(speakers, object), word=np.array(words, object),
                  family=np.array(["espeak-ng/en"] * 20, object),
                  digest=np.array([f"{index:040x}" for index in range(20)], object))
    return make_trials(clips, sorted(set(speakers)), enrollment_utterances=2, seed=0)


def test_raw_cosine_eer_is_zero_for_separated_speakers_one_half_for_identical_embeddings_and_matches_by_hand():
    from training.evaluation import verification
    from training.workloads.speaker_verification.report import raw_cosine_eer

    trials = small_trials()
    assert set(trials.label[trials.condition("all")]) == {0, 1}
    speaker_of_clip = np.repeat(np.arange(4), 5)
    assert raw_cosine_eer(np.eye(4)[speaker_of_clip] + 0.01, trials) == 0.0
    assert raw_cosine_eer(np.ones((20, 3)), trials) == pytest.approx(0.5)
    embeddings = np.random.default_rng(3).normal(size=(20, 6))
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    models = {speaker: unit[rows].mean(axis=0) / np.linalg.norm(unit[rows].mean(axis=0))
              for speaker, rows in trials.enrollment.items()}
    by_hand = np.array([models[speaker] @ unit[clip] for speaker, clip in zip(trials.model_speaker,
                                                                              trials.test_clip, strict=True)])
    chosen = trials.condition("all")
    assert raw_cosine_eer(embeddings, trials) == pytest.approx(
        verification.equal_error_rate(trials.label[chosen], by_hand[chosen]).value)
