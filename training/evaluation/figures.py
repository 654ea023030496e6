"""Figures logged as MLflow artifacts.

Learning curves and staleness come as matplotlib figures (tracking logs them with MLflow's log_figure);
confusion matrices and feature maps as PNG bytes, which their jobs hand to tracking or write beside the data.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100  # every PNG, whether rendered here or by MLflow's log_figure


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    close(figure)
    return buffer.getvalue()


def close(figure: Figure) -> None:
    """Frees a figure pyplot still holds (a returned figure stays open until its caller closes it)."""
    _pyplot().close(figure)


def learning_curves_figure(epochs: Sequence[dict], evaluations: Sequence[dict], target_accuracy: float,
                           title: str) -> Figure:
    """Loss per epoch, and accuracy against the training clock (every evaluation, not only epoch ends)."""
    plt = _pyplot()
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(11, 4))
    epoch_numbers = [row["epoch"] for row in epochs]
    losses = [np.nan if row["train_loss"] is None else row["train_loss"] for row in epochs]  # None: not recorded
    loss_axis.plot(epoch_numbers, losses, marker="o", label="train loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("loss")
    loss_axis.set_yscale("log")
    loss_axis.grid(alpha=0.3)
    loss_axis.legend()
    seconds = [row["train_seconds"] for row in evaluations]
    accuracy_axis.plot(seconds, [100 * row["val_accuracy"] for row in evaluations], marker=".",
                       label="validation accuracy (during training)")
    epoch_ends = [row for row in evaluations if float(row["epoch"]).is_integer()]
    train_accuracy = {row["epoch"]: np.nan if row["train_accuracy"] is None else row["train_accuracy"]
                      for row in epochs}
    accuracy_axis.plot([row["train_seconds"] for row in epoch_ends],
                       [100 * train_accuracy.get(int(row["epoch"]), np.nan) for row in epoch_ends],
                       marker="o", linestyle="--", label="train accuracy (epoch mean)")
    accuracy_axis.axhline(100 * target_accuracy, color="grey", linestyle=":", label=f"target {target_accuracy:.1%}")
    accuracy_axis.set_xlabel("training seconds (evaluations excluded)")
    accuracy_axis.set_ylabel("accuracy (%)")
    lowest = min([100 * row["val_accuracy"] for row in evaluations] + [100 * target_accuracy - 1])
    # The interesting part lies near the target: early epochs far below it would squash the curve.
    accuracy_axis.set_ylim(max(lowest - 0.5, 100 * target_accuracy - 20), 100)
    accuracy_axis.grid(alpha=0.3)
    accuracy_axis.legend(loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def confusion_matrix_png(confusion: np.ndarray, class_names: Sequence[str], title: str) -> bytes:
    plt = _pyplot()
    size = len(class_names)
    figure, axis = plt.subplots(figsize=(1.0 + 0.6 * size, 0.8 + 0.6 * size))
    shown = np.log1p(confusion)  # the diagonal dwarfs every error: a log scale lets the errors show
    axis.imshow(shown, cmap="Blues")
    for true in range(size):
        for predicted in range(size):
            count = confusion[true, predicted]
            if count:
                colour = "white" if shown[true, predicted] > shown.max() * 0.6 else "black"
                axis.text(predicted, true, str(count), ha="center", va="center", fontsize=7, color=colour)
    long_names = max(len(name) for name in class_names) > 2
    axis.set_xticks(range(size), class_names, rotation=60 if long_names else 0, ha="right" if long_names else "center")
    axis.set_yticks(range(size), class_names)
    axis.set_xlabel("predicted")
    axis.set_ylabel("true")
    axis.set_title(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)


def staleness_histogram_figure(counts: dict[int, int], title: str) -> Figure:
    """How many server versions arrived between a worker's fetch and its push, over all pushes."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 3.5))
    values = sorted(counts)
    total = sum(counts.values()) or 1
    axis.bar(values, [100 * counts[value] / total for value in values], width=0.8)
    mean = sum(value * count for value, count in counts.items()) / total
    axis.axvline(mean, color="black", linestyle=":", label=f"mean {mean:.2f}")
    axis.xaxis.set_major_locator(_pyplot().MaxNLocator(integer=True))
    axis.set_xlabel(f"staleness (server versions between fetch and push), {total:,} pushes")
    axis.set_ylabel("pushes (%)")
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3, axis="y")
    axis.legend()
    figure.tight_layout()
    return figure


def feature_maps_png(originals: np.ndarray, augmented: np.ndarray, words: Sequence[str], kind: str) -> bytes:
    """Feature maps (frames × bands) of a few clips, each above its augmented copy."""
    plt = _pyplot()
    count = len(originals)
    figure, axes = plt.subplots(2, count, figsize=(2.6 * count, 4.6), squeeze=False)
    for column in range(count):
        for row, (maps, label) in enumerate(((originals, "original"), (augmented, "augmented"))):
            axis = axes[row][column]
            axis.imshow(maps[column].T, origin="lower", aspect="auto", cmap="magma")
            axis.set_title(f"{words[column]} · {label}", fontsize=8)
            axis.set_xlabel("frame (10 ms)", fontsize=7)
            axis.set_ylabel("band", fontsize=7)
            axis.tick_params(labelsize=6)
    figure.suptitle(f"{kind} features: originals (top) and their first augmented copy (bottom)", fontsize=9)
    figure.tight_layout()
    return _png(figure)


def keyword_threshold_png(curve: dict[str, list[float]], metrics: dict[str, float], target: float) -> bytes:
    """Keyword spotting: validation accuracy against open-set false accepts as the keyword threshold rises, the
    target, the threshold chosen on validation and the test figures at it."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    axes.plot(100 * np.array(curve["open_set_false_accept_rate"]), 100 * np.array(curve["validation_accuracy"]),
              marker=".", markersize=3, label="validation, threshold 0 → 1")
    axes.axvline(100 * target, color="grey", linestyle=":", label=f"target {target:.0%}")
    axes.plot(100 * metrics["validation_open_set_false_accept_rate_at_threshold"],
              100 * metrics["validation_accuracy_at_threshold"], "o", color="C3",
              label=f"chosen on validation: threshold {metrics['keyword_threshold']:.3f}")
    axes.plot(100 * metrics["open_set_false_accept_rate_at_threshold"], 100 * metrics["test_accuracy_at_threshold"],
              "x", color="C2", markersize=9, label="test at that threshold (read once)")
    axes.set_xlabel("open-set false accepts (%)")
    axes.set_ylabel("accuracy, 12 classes (%)")
    axes.set_title("Keyword threshold: accuracy against false accepts")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    return _png(figure)
