"""The strategies' shared bookkeeping: evaluation schedule, epoch rows, throughput and time-to-target, checked
against values worked out by hand."""

from __future__ import annotations

import pytest

from training.strategies.bookkeeping import (
    describe_epoch,
    ends_epoch,
    epoch_end_evaluations,
    epoch_row,
    evaluation,
    evaluation_positions,
    evaluation_schedule,
    samples_per_second,
    time_to_target,
    weighted_mean,
)


def test_schedule_measures_after_the_unit_each_evenly_spaced_point_falls_in():
    # 10 steps, 4 points at 2.5, 5, 7.5, 10 steps: measured after steps 3, 5, 8 and 10.
    assert evaluation_schedule(10, 4) == [3, 5, 8, 10]
    assert evaluation_schedule(31, 4) == [8, 16, 24, 31]  # 7.75, 15.5, 23.25, 31
    assert evaluation_schedule(7, 1) == [7]  # once per epoch: at its end
    assert evaluation_schedule(4, 4) == [1, 2, 3, 4]


def test_points_in_the_same_unit_share_one_measurement():
    # 2 rounds, 4 points at 0.5, 1, 1.5, 2 rounds: after round 1 (twice) and round 2 (twice).
    assert evaluation_schedule(2, 4) == [1, 2]
    assert evaluation_schedule(1, 3) == [1]
    # 4 rounds, 3 points at 4/3, 8/3, 4 rounds: after rounds 2, 3 and 4.
    assert evaluation_schedule(4, 3) == [2, 3, 4]


def test_schedule_refuses_an_epoch_without_units_or_evaluations():
    with pytest.raises(ValueError, match="0 units"):
        evaluation_schedule(0, 4)
    with pytest.raises(ValueError, match="0 evaluations"):
        evaluation_schedule(10, 0)


def test_positions_count_units_from_the_first_epoch_and_record_where_they_are_measured():
    positions = evaluation_positions(10, 4, first_epoch=1, epochs=3)
    assert [position for position, _ in positions] == pytest.approx([1.3, 1.5, 1.8, 2.0, 2.3, 2.5, 2.8, 3.0])
    assert [units for _, units in positions] == [3, 5, 8, 10, 13, 15, 18, 20]
    assert [ends_epoch(position) for position, _ in positions] == [False, False, False, True] * 2


def test_time_to_target_is_the_clock_at_the_first_evaluation_that_reached_it():
    evaluations = [evaluation(1.5, 0.5, 0.80), evaluation(3.0, 1.0, 0.97), evaluation(4.5, 1.5, 0.96),
                   evaluation(6.0, 2.0, 0.99)]
    assert time_to_target(evaluations, 0.95) == 3.0
    assert time_to_target(evaluations, 0.99) == 6.0  # reaching it exactly counts
    assert time_to_target(evaluations, 0.995) is None
    assert time_to_target([], 0.5) is None
    assert epoch_end_evaluations(evaluations) == [evaluations[1], evaluations[3]]


def test_weighted_mean_weights_each_value_by_its_examples():
    # (0.5·100 + 0.2·300) / 400 = 110 / 400 = 0.275
    assert weighted_mean([0.5, 0.2], [100, 300]) == pytest.approx(0.275)
    assert weighted_mean([], []) is None  # nothing reported (an earlier attempt's epoch)
    with pytest.raises(ValueError, match="2 values for 1 weights"):
        weighted_mean([0.5, 0.2], [100])


def test_epoch_row_has_the_shared_metric_names_and_its_throughput():
    row = epoch_row(3, train_loss=0.25, train_accuracy=0.9, val_accuracy=0.95, epoch_seconds=8.0, samples=4096)
    assert row == {"epoch": 3, "train_loss": 0.25, "train_accuracy": 0.9, "val_accuracy": 0.95,
                   "epoch_seconds": 8.0, "samples_per_second": 512.0}
    unknown = epoch_row(1, None, None, 0.5, 2.0, 100)
    assert unknown["train_loss"] is None and unknown["train_accuracy"] is None
    assert samples_per_second(300, 1.5) == 200.0
    with pytest.raises(ValueError, match="0.0 s"):
        samples_per_second(300, 0.0)


def test_progress_line_reads_as_the_strategies_print_it():
    row = epoch_row(2, 0.12345, 0.96, 0.9712, 12.34, 12340)
    assert describe_epoch(row, 5) == ("epoch 2/5: loss 0.1235 accuracy 0.9600 val_accuracy 0.9712 12.3 s "
                                      "1000 samples/s")
