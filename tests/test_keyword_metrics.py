"""Keyword false accepts and per-group accuracy against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.workloads.kws_densenet_bilstm.metrics import (
    accuracy_by_group,
    false_accepts,
    keyword_labels,
    keyword_threshold,
    threshold_curve,
    thresholded_predictions,
)

CLASSES = ["_silence_", "_unknown_", "yes", "no"]


def test_false_accepts_count_keywords_only_and_split_by_keyword():
    # Eight non-keyword clips: 3 rejected as _unknown_, 1 taken for silence (a reject), 3 as "yes", 1 as "no".
    predictions = np.array([1, 1, 1, 0, 2, 2, 2, 3])
    rate, by_keyword = false_accepts(predictions, CLASSES)
    assert keyword_labels(CLASSES) == [2, 3]
    assert rate == pytest.approx(4 / 8)
    assert by_keyword == {"yes": pytest.approx(3 / 8), "no": pytest.approx(1 / 8)}
    rate, by_keyword = false_accepts(np.array([], np.int64), CLASSES)
    assert math.isnan(rate) and by_keyword == {}


def test_accuracy_by_group_leaves_out_rows_of_no_group():
    labels = np.array([2, 3, 2, 1, 0])
    predictions = np.array([2, 2, 2, 1, 1])
    groups = ["espeak-ng/en-us", "espeak-ng/en-us", "pico/en-GB", "pico/en-GB", None]  # None: a silence clip
    result = accuracy_by_group(labels, predictions, groups)
    assert result == {"espeak-ng/en-us": {"clips": 2, "correct": 1, "accuracy": 0.5},
                      "pico/en-GB": {"clips": 2, "correct": 2, "accuracy": 1.0}}
    with pytest.raises(ValueError, match="5 labels, 5 predictions and 4 groups"):
        accuracy_by_group(labels, predictions, groups[:4])


# Ten clips that say no keyword: softmax rows over CLASSES. Four are taken for a keyword by argmax, with
# confidences 0.9, 0.7, 0.6 and 0.6 (a tie); the others are _unknown_ or _silence_.
OPEN_SET = np.array([[0.1, 0.0, 0.9, 0.0], [0.1, 0.2, 0.0, 0.7], [0.2, 0.2, 0.6, 0.0], [0.0, 0.4, 0.0, 0.6],
                     *[[0.1, 0.8, 0.1, 0.0]] * 5, [0.7, 0.1, 0.1, 0.1]], np.float32)


@pytest.mark.parametrize(("target", "accepts"), [(0.4, 4), (0.3, 2), (0.2, 2), (0.15, 1), (0.1, 1), (0.05, 0),
                                                 (0.0, 0), (1.0, 4)])
def test_the_threshold_is_the_lowest_that_keeps_false_accepts_within_the_target(target, accepts):
    threshold = keyword_threshold(OPEN_SET, CLASSES, target)
    predictions = thresholded_predictions(OPEN_SET, CLASSES, threshold)
    rate = false_accepts(predictions, CLASSES)[0]
    assert rate == pytest.approx(accepts / 10) and rate <= target
    # the lowest: any threshold below it accepts more than the target allows (where argmax alone does not fit)
    if threshold > 0:
        lower = thresholded_predictions(OPEN_SET, CLASSES, np.nextafter(threshold, 0) - 1e-6)
        assert false_accepts(lower, CLASSES)[0] > target
    else:
        assert accepts == 4


def test_a_keyword_below_the_threshold_becomes_unknown_and_nothing_else_changes():
    predictions = thresholded_predictions(OPEN_SET, CLASSES, 0.65)
    assert predictions.tolist() == [2, 3, 1, 1, 1, 1, 1, 1, 1, 0]
    assert thresholded_predictions(OPEN_SET, CLASSES, 0.0).tolist() == np.argmax(OPEN_SET, axis=1).tolist()


def test_the_threshold_curve_trades_accuracy_for_false_accepts():
    validation = np.array([[0.0, 0.1, 0.9, 0.0], [0.0, 0.5, 0.0, 0.5], [0.1, 0.3, 0.0, 0.6]], np.float32)
    curve = threshold_curve(validation, np.array([2, 1, 3]), OPEN_SET, CLASSES, points=11)
    assert curve["threshold"][0] == 0.0 and curve["threshold"][-1] == 1.0
    assert curve["open_set_false_accept_rate"][0] == pytest.approx(0.4)
    assert curve["open_set_false_accept_rate"][-1] == 0.0
    assert np.all(np.diff(curve["open_set_false_accept_rate"]) <= 0)
    # argmax gets all three (the tie goes to _unknown_); above 0.6 the third is rejected, above 0.9 the first too
    accuracy = dict(zip(curve["threshold"], curve["validation_accuracy"], strict=True))
    assert accuracy[0.0] == pytest.approx(1.0) and accuracy[1.0] == pytest.approx(1 / 3)
    between = [value for threshold, value in accuracy.items() if 0.61 < threshold <= 0.9]
    assert between and all(value == pytest.approx(2 / 3) for value in between)
    # drawn where the rejectable confidences lie (0.6 to 0.9 here), not evenly over 0 to 1
    assert min(threshold for threshold in curve["threshold"] if threshold > 0) == pytest.approx(0.6)
