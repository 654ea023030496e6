"""Keyword false accepts and per-group accuracy against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.workloads.kws_densenet_bilstm.metrics import accuracy_by_group, false_accepts, keyword_labels

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
