"""What every strategy measures, computed once: the evaluation schedule, per-epoch rows, throughput and
time-to-target. Pure functions on plain numbers (no TensorFlow), so each is tested against hand-computed values.

The evaluation schedule counts an epoch in *units*: training steps (Horovod), pushed steps of all workers
together (Downpour) or averaging rounds. The k-th of n evaluation points lies at k/n of the epoch and is measured
after the unit it falls in, ceil(k · units / n); the last is always the epoch's end. Points that fall in the same
unit share one measurement, so an epoch of fewer units than evaluations has one evaluation per unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

EPOCH_END_TOLERANCE = 1e-9


def evaluation_schedule(units_per_epoch: int, evaluations_per_epoch: int) -> list[int]:
    """After how many units into an epoch each evaluation is taken: ascending, distinct, the last the epoch's end."""
    if units_per_epoch < 1 or evaluations_per_epoch < 1:
        raise ValueError(f"an epoch needs ≥ 1 unit and ≥ 1 evaluation, got {units_per_epoch} units and "
                         f"{evaluations_per_epoch} evaluations")
    # -(-a // b) is ceil(a / b) in exact integer arithmetic.
    return sorted({-(-part * units_per_epoch // evaluations_per_epoch)
                   for part in range(1, evaluations_per_epoch + 1)})


def evaluation_positions(units_per_epoch: int, evaluations_per_epoch: int, first_epoch: int,
                         epochs: int) -> list[tuple[float, int]]:
    """(epoch position, units counted from the start of ``first_epoch``) of every evaluation up to ``epochs``.

    The position is where the evaluation is measured, e.g. 2.3 after 3 of 10 units of the third epoch."""
    schedule = evaluation_schedule(units_per_epoch, evaluations_per_epoch)
    return [(epoch + units / units_per_epoch, (epoch - first_epoch) * units_per_epoch + units)
            for epoch in range(first_epoch, epochs) for units in schedule]


def ends_epoch(position: float) -> bool:
    """Whether an epoch position (as recorded with an evaluation) is an epoch's end."""
    return abs(position - round(position)) < EPOCH_END_TOLERANCE


def evaluation(train_seconds: float, position: float, val_accuracy: float) -> dict[str, float]:
    """One evaluation as strategies record it: on the training clock, at an epoch position."""
    return {"train_seconds": float(train_seconds), "epoch": float(position), "val_accuracy": float(val_accuracy)}


def epoch_end_evaluations(evaluations: Iterable[dict[str, float]]) -> list[dict[str, float]]:
    """The evaluations taken at epochs' ends, in order."""
    return [record for record in evaluations if ends_epoch(record["epoch"])]


def time_to_target(evaluations: Iterable[dict[str, float]], target_accuracy: float) -> float | None:
    """The training clock at the first evaluation whose accuracy reached the target; None if none did."""
    return next((record["train_seconds"] for record in evaluations if record["val_accuracy"] >= target_accuracy),
                None)


def samples_per_second(samples: float, seconds: float) -> float:
    """Throughput of an epoch; an epoch measured as taking no time has no meaningful rate."""
    if seconds <= 0:
        raise ValueError(f"cannot compute a throughput over {seconds} s ({samples} samples)")
    return samples / seconds


def independent_epoch_seconds(samples: Sequence[float], seconds: Sequence[float]) -> float:
    """The seconds one epoch of workers that never wait for each other takes: Σ samples ÷ Σ (samples ÷ seconds).

    Independent workers add their rates whatever their speeds (the ceiling's definition), so the epoch's
    samples_per_second is the sum of the workers' own; the slowest worker's time would undercount it."""
    if len(samples) != len(seconds) or not samples:
        raise ValueError(f"{len(samples)} sample counts for {len(seconds)} durations")
    total_rate = sum(samples_per_second(count, duration) for count, duration in zip(samples, seconds, strict=True))
    return sum(samples) / total_rate


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float | None:
    """Σ value·weight / Σ weight (e.g. losses weighted by examples); None when nothing was weighed."""
    if len(values) != len(weights):
        raise ValueError(f"{len(values)} values for {len(weights)} weights")
    total = sum(weights)
    if total <= 0:
        return None
    return sum(value * weight for value, weight in zip(values, weights, strict=True)) / total


SHARED_EPOCH_KEYS = ("epoch", "train_loss", "train_accuracy", "val_accuracy", "epoch_seconds", "samples_per_second")


def epoch_row(epoch: int, train_loss: float | None, train_accuracy: float | None, val_accuracy: float,
              epoch_seconds: float, samples: float) -> dict[str, float | None]:
    """The shared per-epoch metrics (MLflow step = epoch); train_* are None when unknown (an earlier attempt)."""
    return {"epoch": epoch,
            "train_loss": None if train_loss is None else float(train_loss),
            "train_accuracy": None if train_accuracy is None else float(train_accuracy),
            "val_accuracy": float(val_accuracy),
            "epoch_seconds": float(epoch_seconds),
            "samples_per_second": samples_per_second(samples, epoch_seconds)}


def describe_epoch(row: dict[str, float | None], epochs: int) -> str:
    """The progress line of one epoch, e.g. ``epoch 2/5: loss 0.1234 accuracy 0.9600 val_accuracy …``."""
    measured = "".join(f" {name} {value:.4f}" for name, value in row.items()
                       if name not in SHARED_EPOCH_KEYS and isinstance(value, float))  # a workload's epoch_metrics
    return (f"epoch {row['epoch']}/{epochs}: loss {row['train_loss']:.4f} accuracy {row['train_accuracy']:.4f} "
            f"val_accuracy {row['val_accuracy']:.4f}{measured} {row['epoch_seconds']:.1f} s "
            f"{row['samples_per_second']:.0f} samples/s")
