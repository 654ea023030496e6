"""Keyword-spotting metrics beyond accuracy: keyword false accepts and accuracy per group (voice family)."""

from __future__ import annotations

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
