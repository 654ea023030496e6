"""A workload's named presets: they fill the settings they name, explicit values win, an unknown one is refused."""

from __future__ import annotations

import argparse

import pytest

from training.config import RunSpec, RunSpecError, preset_values


def parsed(*flags: str) -> RunSpec:
    parser = argparse.ArgumentParser()
    RunSpec.add_arguments(parser)
    return RunSpec.from_args(parser.parse_args(list(flags)))


def test_the_full_mnist_preset_fills_its_settings_and_a_flag_given_wins():
    full = parsed("--preset", "full")
    assert (full.augment_copies, full.epochs, full.learning_rate_decay) == (0, 70, "cosine")
    assert (full.online_elastic, full.elastic_fraction, full.evaluations_per_epoch) == (True, 0.5, 1)
    assert (full.convolutions_per_stage, full.dense_units, full.batch_norm) == (2, 256, True)
    assert (full.rotation_degrees, full.scale_jitter, full.shift_pixels) == (10.0, 0.1, 0.0)
    assert full.batch_size_per_worker == RunSpec().batch_size_per_worker  # what it does not name is the default
    assert parsed("--preset", "full", "--epochs", "3").epochs == 3
    assert parsed("--epochs", "3").augment_copies == RunSpec().augment_copies  # no preset, no change


def test_the_full_keyword_preset_trains_on_more_speakers_not_more_passes_over_the_demo_s():
    full = parsed("--workload", "kws_densenet_bilstm", "--preset", "full")
    demo = parsed("--workload", "kws_densenet_bilstm")
    assert (full.speakers, full.epochs, full.learning_rate_decay) == (1000, 40, "cosine")
    assert (full.train_unknown_percentage, demo.train_unknown_percentage) == (30, 10)  # chosen on validation
    assert full.speakers == 5 * demo.speakers and full.batch_size_per_worker == demo.batch_size_per_worker


@pytest.mark.parametrize("workload", ["mnist_elastic_cnn", "kws_densenet_bilstm"])
def test_a_preset_names_real_settings_with_valid_values(workload):
    values = preset_values(workload, "full")
    RunSpec.from_mapping({"workload": workload, **values}).validate()


@pytest.mark.parametrize(("workload", "preset", "message"), [
    ("mnist_elastic_cnn", "fastest", "has the presets full"),
    ("kws_densenet_bilstm", "fastest", "has the presets full"),
    ("speaker_verification", "full", "has no presets"),
])
def test_an_unknown_preset_is_refused_in_one_line(workload, preset, message):
    with pytest.raises(RunSpecError, match=message):
        parsed("--workload", workload, "--preset", preset)
