"""The learning-rate decay Horovod follows after its warm-up (pure: hand-computed points)."""

from __future__ import annotations

import pytest

from training.config import RunSpec, RunSpecError
from training.strategies.horovod_rank import cosine_decay


def test_cosine_decay_is_one_at_the_start_half_in_the_middle_and_zero_at_the_end():
    multiplier = cosine_decay(1, 5)
    assert [multiplier(epoch) for epoch in (0, 1, 3, 5, 6)] == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])
    assert multiplier(2) == pytest.approx(0.5 * (1 + 0.7071067811865476))  # a quarter of the way: cos(π/4)


def test_the_decay_setting_takes_only_its_choices():
    assert RunSpec().learning_rate_decay == "none"
    with pytest.raises(RunSpecError, match="learning_rate_decay='linear': must be one of none, cosine"):
        RunSpec(learning_rate_decay="linear").validate()
