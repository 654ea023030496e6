"""Keyword-spotting metrics beyond accuracy: keyword false accepts and accuracy per group (voice family)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from training.speech.speech_commands import SILENCE, UNKNOWN


def keyword_labels(class_names: Sequence[str]) -> list[int]:
    """The labels that are keywords: every class but _silence_ and _unknown_."""
    return [label for label, name in enumerate(class_names) if name not in (SILENCE, UNKNOWN)]


def false_accepts(predictions: np.ndarray, class_names: Sequence[str]) -> tuple[float, dict[str, float]]:
    """(false-accept rate, keyword → its share) over predictions for clips that say no keyword: the share of them
    classified as any keyword, and as each one. Taking a spoken non-keyword for silence is a reject, not an accept.
    NaN (and no shares) for no clips."""
    predictions = np.asarray(predictions, np.int64)
    keywords = keyword_labels(class_names)
    if predictions.size == 0:
        return float("nan"), {}
    accepted_as = {class_names[label]: float(np.mean(predictions == label)) for label in keywords}
    return float(np.isin(predictions, keywords).mean()), accepted_as


def accuracy_by_group(labels: np.ndarray, predictions: np.ndarray, groups: Sequence[str | None]) -> dict[str, dict]:
    """group → {"clips", "correct", "accuracy"} for every group named (``None`` entries belong to none)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if not len(labels) == len(predictions) == len(groups):
        raise ValueError(f"{len(labels)} labels, {len(predictions)} predictions and {len(groups)} groups")
    result: dict[str, dict] = {}
    for group in sorted({group for group in groups if group is not None}):
        chosen = np.array([member == group for member in groups])
        correct = int(np.sum(labels[chosen] == predictions[chosen]))
        result[group] = {"clips": int(chosen.sum()), "correct": correct, "accuracy": correct / int(chosen.sum())}
    return result


def keyword_threshold(probabilities: np.ndarray, class_names: Sequence[str], target: float) -> float:
    """The lowest confidence a keyword prediction must reach for at most ``target`` (a fraction) of these clips —
    none of which says a keyword — to be taken for one: just above the confidence of the first accept over the
    allowance, so ties are rejected too; 0.0 when argmax alone stays within it."""
    probabilities = np.asarray(probabilities)
    predicted, confidence = np.argmax(probabilities, axis=1), np.max(probabilities, axis=1)
    accepted = np.sort(confidence[np.isin(predicted, keyword_labels(class_names))])[::-1].astype(np.float64)
    allowed = math.floor(target * len(probabilities) + 1e-9)
    if len(accepted) <= allowed:
        return 0.0
    return float(np.nextafter(accepted[allowed], np.inf))


def thresholded_predictions(probabilities: np.ndarray, class_names: Sequence[str], threshold: float) -> np.ndarray:
    """Class predictions where a keyword predicted with less than ``threshold`` confidence becomes _unknown_ (a
    reject): how a deployed spotter trades missed keywords for fewer false accepts."""
    probabilities = np.asarray(probabilities)
    predicted = np.argmax(probabilities, axis=1)
    # float64: a float32 confidence compared with the threshold would round the threshold to float32, back onto the
    # confidence it was chosen just above
    confidence = np.max(probabilities, axis=1).astype(np.float64)
    unsure = np.isin(predicted, keyword_labels(class_names)) & (confidence < threshold)
    return np.where(unsure, list(class_names).index(UNKNOWN), predicted)


def threshold_curve(validation: np.ndarray, validation_labels: np.ndarray, open_set: np.ndarray,
                    class_names: Sequence[str], points: int = 101) -> dict[str, list[float]]:
    """Validation accuracy and open-set false accepts over thresholds from 0 to 1: what the chosen threshold
    trades (the evaluation plots it). The thresholds are quantiles of the confidences that can be rejected, so the
    curve is drawn where they lie (a trained model's are mostly above 0.9), not evenly over [0, 1]."""
    confidences = [np.max(scores, axis=1)[np.isin(np.argmax(scores, axis=1), keyword_labels(class_names))]
                   for scores in (np.asarray(validation), np.asarray(open_set))]
    rejectable = np.concatenate(confidences).astype(np.float64)
    quantiles = np.quantile(rejectable, np.linspace(0.0, 1.0, points)) if rejectable.size else np.empty(0)
    thresholds = np.unique(np.concatenate([[0.0], quantiles, [1.0]]))
    labels = np.asarray(validation_labels)
    return {"threshold": thresholds.tolist(),
            "validation_accuracy": [float(np.mean(thresholded_predictions(validation, class_names, t) == labels))
                                    for t in thresholds],
            "open_set_false_accept_rate": [false_accepts(thresholded_predictions(open_set, class_names, t),
                                                         class_names)[0] for t in thresholds]}
