"""A verification system from embeddings to a report: enrollment, cosine scores, S-norm against a cohort of training
speakers, calibration and fusion trained on development trials, and per-condition metrics with bootstrap intervals
over speakers — for each embedding model, their equal-weight fusion and their logistic-regression fusion.

Pure NumPy on top of :mod:`.scoring` (the scoring steps), :mod:`.verification` (the metrics) and
:mod:`.trials` (who is compared with what); figures (DET curves, score histograms) come as PNG bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from training.evaluation import scoring, verification
from training.speech.trials import CONDITIONS, Trials

P_TARGETS = (0.01, 0.05)  # NIST-style operating points (C_miss = C_fa = 1)
FUSION_PRIOR = 0.05  # the prior fusion and calibration are trained at: between the two operating points
EQUAL_WEIGHT = "equal_weight_fusion"
FUSION = "logistic_fusion"


def p_target_name(p_target: float) -> str:
    """0.01 → 'p01', 0.05 → 'p05': metric names without dots."""
    return "p" + f"{p_target:.2f}".split(".")[1]


@dataclass(frozen=True)
class TrialScores:
    """One system's scores for one trial list: the raw cosines and their S-norm."""

    raw: np.ndarray
    normalised: np.ndarray


def speaker_cohort(embeddings: np.ndarray, speakers: np.ndarray, cohort_speakers: Sequence[str]) -> np.ndarray:
    """One vector per cohort speaker (the enrolled model of all its clips): speakers, not clips, are the cohort, so
    a speaker with more clips does not weigh more."""
    speakers = np.asarray(speakers)
    rows = [np.flatnonzero(speakers == speaker) for speaker in cohort_speakers]
    if not rows or any(len(row) == 0 for row in rows):
        raise ValueError("every cohort speaker needs at least one clip with an embedding")
    return np.stack([scoring.enroll(embeddings[row]) for row in rows])


def score_trials(embeddings: np.ndarray, trials: Trials, cohort: np.ndarray, cohort_top: int | None = None
                 ) -> TrialScores:
    """Cosine scores of every trial (model = mean of its enrollment embeddings) and their S-norm (AS-norm with
    ``cohort_top``)."""
    model_speakers = sorted(trials.enrollment)
    models = np.stack([scoring.enroll(embeddings[trials.enrollment[speaker]]) for speaker in model_speakers])
    model_row = {speaker: row for row, speaker in enumerate(model_speakers)}
    model_of_trial = np.array([model_row[speaker] for speaker in trials.model_speaker], np.int64)
    test_clips, test_of_trial = np.unique(trials.test_clip, return_inverse=True)
    tests = embeddings[test_clips]
    raw = scoring.cosine_scores(models, tests, model_of_trial, test_of_trial)
    top = None if cohort_top is None else min(cohort_top, len(cohort))
    normalised = scoring.symmetric_normalisation(
        raw, scoring.cohort_statistics(models, cohort, top), scoring.cohort_statistics(tests, cohort, top),
        model_of_trial, test_of_trial)
    return TrialScores(raw, normalised)


def raw_cosine_eer(embeddings: np.ndarray, trials: Trials, condition: str = "all") -> float:
    """The EER of raw cosine scores (no normalisation, no cohort) on one condition of a trial list: the training
    clock's verification measure (development trials after each epoch). ``embeddings`` is indexed by clip index;
    only the trials' clips are read."""
    model_speakers = sorted(trials.enrollment)
    models = np.stack([scoring.enroll(embeddings[trials.enrollment[speaker]]) for speaker in model_speakers])
    model_row = {speaker: row for row, speaker in enumerate(model_speakers)}
    model_of_trial = np.array([model_row[speaker] for speaker in trials.model_speaker], np.int64)
    scores = scoring.cosine_scores(models, embeddings, model_of_trial, trials.test_clip)
    chosen = trials.condition(condition)
    return verification.equal_error_rate(trials.label[chosen], scores[chosen]).value


def _metric_eer(labels: np.ndarray, scores: np.ndarray) -> float:
    return verification.equal_error_rate(labels, scores).value


def _metric_min_dcf(p_target: float):
    def metric(labels: np.ndarray, scores: np.ndarray) -> float:
        return verification.minimum_dcf(labels, scores, p_target).value

    return metric


def condition_metrics(labels: np.ndarray, scores: np.ndarray, llrs: np.ndarray, speakers: np.ndarray,
                      resamples: int, seed: int) -> dict[str, float]:
    """EER, minimum DCF (both with their thresholds, on the normalised scores), actual DCF and Cllr (on the
    calibrated LLRs), and 95 % bootstrap intervals over speakers for EER and minimum DCF."""
    eer = verification.equal_error_rate(labels, scores)
    metrics = {"eer": eer.value, "eer_threshold": eer.threshold}
    low, high = verification.bootstrap_interval(labels, scores, speakers, _metric_eer, resamples, seed)
    metrics |= {"eer_ci_low": low, "eer_ci_high": high}
    for p_target in P_TARGETS:
        name = p_target_name(p_target)
        point = verification.minimum_dcf(labels, scores, p_target)
        metrics |= {f"min_dcf_{name}": point.value, f"min_dcf_{name}_threshold": point.threshold,
                    f"act_dcf_{name}": verification.actual_dcf(labels, llrs, p_target).value}
        low, high = verification.bootstrap_interval(labels, scores, speakers, _metric_min_dcf(p_target), resamples,
                                                    seed)
        metrics |= {f"min_dcf_{name}_ci_low": low, f"min_dcf_{name}_ci_high": high}
    metrics["cllr"] = verification.cllr(labels, llrs)
    return metrics


@dataclass(frozen=True)
class VerificationReport:
    """Everything the evaluate step logs: metrics by (system, condition), the fusions, trial counts, and the
    evaluation scores per system (for figures and the scores artifact)."""

    metrics: dict[str, dict[str, dict[str, float]]]  # system → condition → metric → value
    fusion: dict[str, dict[str, Any]]  # system → its LinearFusion as a mapping (calibration for single systems)
    differences: dict[str, dict[str, float]]  # condition → fused EER − best single EER with its interval
    counts: dict[str, dict[str, int]]  # condition → targets / non-targets on the evaluation trials
    evaluation_scores: dict[str, np.ndarray]  # system → normalised scores (LLRs for the two fusions)
    evaluation_labels: np.ndarray

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metric names: ``<metric>_<system>_<condition>``, e.g. ``eer_logistic_fusion_different_word``."""
        flat = {f"{metric}_{system}_{condition}": value
                for system, by_condition in self.metrics.items()
                for condition, values in by_condition.items() for metric, value in values.items()}
        for condition, values in self.differences.items():
            flat |= {f"fusion_eer_gain_{condition}_{key}": value for key, value in values.items()}
        for condition, values in self.counts.items():
            flat |= {f"trials_{condition}_{key}": float(value) for key, value in values.items()}
        return flat

    def to_mapping(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "fusion": self.fusion, "differences": self.differences,
                "counts": self.counts}


def evaluate_systems(embeddings: Mapping[str, np.ndarray], clip_speakers: np.ndarray, cohort_speakers: Sequence[str],
                     development: Trials, evaluation: Trials, cohort_top: int | None = None, resamples: int = 200,
                     seed: int = 0, conditions: Sequence[str] = CONDITIONS) -> VerificationReport:
    """Score both trial lists with every system, train calibration and fusion on the development trials only, and
    measure every system and fusion on the evaluation trials, per condition.

    ``embeddings`` maps a system name to the embeddings of every clip (rows = clip indices of the trials);
    ``clip_speakers`` names each clip's speaker; the cohort is ``cohort_speakers`` (training speakers only).
    """
    if not embeddings:
        raise ValueError("no embedding system to evaluate")
    names = list(embeddings)
    scores: dict[str, tuple[TrialScores, TrialScores]] = {}
    for name in names:
        cohort = speaker_cohort(embeddings[name], clip_speakers, cohort_speakers)
        scores[name] = (score_trials(embeddings[name], development, cohort, cohort_top),
                        score_trials(embeddings[name], evaluation, cohort, cohort_top))
    # Fusion and calibration learn from the development trials' natural mix ("all"), not from the extra same-word
    # and same-family non-targets sampled to fill those conditions.
    natural = development.condition("all")
    dev_labels = development.label[natural]
    dev_matrix = np.stack([scores[name][0].normalised[natural] for name in names], axis=1)
    eval_matrix = np.stack([scores[name][1].normalised for name in names], axis=1)

    systems: dict[str, tuple[np.ndarray, np.ndarray, scoring.LinearFusion]] = {}  # name → (scores, llrs, fusion)
    for column, name in enumerate(names):
        calibration = scoring.train_fusion(dev_matrix[:, column], dev_labels, FUSION_PRIOR)
        systems[name] = (eval_matrix[:, column], calibration.llr(eval_matrix[:, column]), calibration)
    if len(names) > 1:
        equal = scoring.equal_weight_fusion(dev_matrix)
        equal_dev, equal_eval = equal.llr(dev_matrix), equal.llr(eval_matrix)
        equal_calibration = scoring.train_fusion(equal_dev, dev_labels, FUSION_PRIOR)
        systems[EQUAL_WEIGHT] = (equal_eval, equal_calibration.llr(equal_eval), equal_calibration)
        fusion = scoring.train_fusion(dev_matrix, dev_labels, FUSION_PRIOR)
        fused = fusion.llr(eval_matrix)
        systems[FUSION] = (fused, fused, fusion)

    labels, speakers = evaluation.label, np.asarray(evaluation.model_speaker)
    metrics: dict[str, dict[str, dict[str, float]]] = {name: {} for name in systems}
    differences: dict[str, dict[str, float]] = {}
    counts = {condition: evaluation.counts()[condition] for condition in conditions}
    for condition in conditions:
        mask = evaluation.condition(condition)
        if not (labels[mask] == 1).any() or not (labels[mask] == 0).any():
            continue  # a condition without both kinds of trial has no error rates (its counts say so)
        for name, (system_scores, llrs, _) in systems.items():
            metrics[name][condition] = condition_metrics(labels[mask], system_scores[mask], llrs[mask],
                                                         speakers[mask], resamples, seed)
        if FUSION in systems:
            best = min(names, key=lambda name: metrics[name][condition]["eer"])
            gain, low, high = verification.paired_bootstrap_difference(
                labels[mask], systems[FUSION][0][mask], systems[best][0][mask], speakers[mask], _metric_eer,
                resamples, seed)
            differences[condition] = {"difference": gain, "ci_low": low, "ci_high": high}
    return VerificationReport(
        metrics=metrics, fusion={name: fusion.to_mapping() for name, (_, _, fusion) in systems.items()},
        differences=differences, counts=counts,
        evaluation_scores={name: system_scores for name, (system_scores, _, _) in systems.items()},
        evaluation_labels=labels)


def det_curves_png(report: VerificationReport, evaluation: Trials, condition: str, title: str) -> bytes:
    """Every system's DET curve (probit axes, scikit-learn's DetCurveDisplay) on one plot, EERs in the legend."""
    from sklearn.metrics import DetCurveDisplay

    from training.evaluation.figures import _png, _pyplot

    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6, 5))
    mask = evaluation.condition(condition)
    for name, system_scores in report.evaluation_scores.items():
        eer = report.metrics[name].get(condition, {}).get("eer")
        label = name if eer is None else f"{name} (EER {100 * eer:.2f} %)"
        DetCurveDisplay.from_predictions(report.evaluation_labels[mask], system_scores[mask], name=label, ax=axes)
    from scipy.stats import norm

    # DetCurveDisplay draws on probit-transformed axes: limit them to 0.05-60 %, where systems differ.
    axes.set_xlim(norm.ppf(0.0005), norm.ppf(0.6))
    axes.set_ylim(norm.ppf(0.0005), norm.ppf(0.6))
    axes.legend(loc="upper right", fontsize=8)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    return _png(figure)


def score_histograms_png(report: VerificationReport, title: str) -> bytes:
    """Target and non-target score distributions of each system (all evaluation trials), one panel each."""
    from training.evaluation.figures import _png, _pyplot

    plt = _pyplot()
    names = list(report.evaluation_scores)
    figure, panels = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3), squeeze=False)
    labels = report.evaluation_labels
    for axes, name in zip(panels[0], names, strict=True):
        values = report.evaluation_scores[name]
        bins = np.linspace(np.percentile(values, 0.5), np.percentile(values, 99.5), 60)
        axes.hist(values[labels == 0], bins=bins, density=True, alpha=0.6, label="non-target")
        axes.hist(values[labels == 1], bins=bins, density=True, alpha=0.6, label="target")
        axes.set_title(name, fontsize=9)
        axes.set_yticks([])
    panels[0][0].legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)
