"""Classification metrics: accuracy, per-class accuracy, confusion matrix."""

from __future__ import annotations

import numpy as np


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
    """counts[i, j] = examples of class i predicted as j."""
    labels, predictions = np.asarray(labels, np.int64), np.asarray(predictions, np.int64)
    if labels.shape != predictions.shape:
        raise ValueError(f"{labels.shape[0]} labels but {predictions.shape[0]} predictions")
    return np.bincount(labels * num_classes + predictions, minlength=num_classes**2).reshape(num_classes, num_classes)


def accuracy(confusion: np.ndarray) -> float:
    total = confusion.sum()
    return float(np.trace(confusion) / total) if total else float("nan")


def per_class_accuracy(confusion: np.ndarray) -> np.ndarray:
    """Recall of each class; NaN for a class with no examples."""
    support = confusion.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(support > 0, np.diag(confusion) / support, np.nan)
