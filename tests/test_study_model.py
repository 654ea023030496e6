"""The cost model fitted to a study's own rows: compute per example from its ceiling, constants recovered from
runs the model itself generated, each configuration predicted with it left out, and the extrapolation — every
figure hand-computed below."""

from __future__ import annotations

import pytest

from training.study import report, study_model

# The study's truth: one 1-thread worker computes an example in 0.1 ms; Downpour does not overlap and pays 10 ms
# per message (links unlimited). Batch 100: a step computes 100 × 0.1 ms = 10 ms.
# Messages per step are 1/n_push + 1/n_fetch (n_fetch = n_push):
#   n_push 1:  2 × 10 ms = 20 ms    → step 30 ms     → 2 workers × 100 / 0.030   =  6,666.7 samples/s
#   n_push 4:  0.5 × 10 ms = 5 ms   → step 15 ms     → 2 × 100 / 0.015           = 13,333.3
#   n_push 16: 0.125 × 10 ms = 1.25 ms → step 11.25 ms → 2 × 100 / 0.01125       = 17,777.8
# The ceiling (2 workers, no messages): 2 × 100 / 0.010 = 20,000 → 2 / 20,000 = 0.1 ms per example.
MEASURED = {1: 6_666.667, 4: 13_333.333, 16: 17_777.778}


def row(label, role=report.RUN, samples=1000.0, n_push=4, workers=2, threads=1, parameters=1000):
    return report.Row(label=label, role=role, strategy="downpour", nodes=1, workers_per_node=workers,
                      total_workers=workers, threads_per_worker=threads, n_push=n_push, repetitions=1,
                      samples_per_second=samples, training_seconds=60, wall_seconds=90, time_to_target_seconds=None,
                      test_accuracy=0.99, bytes_moved=0, run_id=label, cores=workers * threads,
                      batch_size_per_worker=100, n_fetch=n_push, parameters=parameters, steps_per_epoch=300)


def study_rows(**changes):
    rows = [row("baseline-1x1", report.BASELINE, 11_000, workers=1, threads=2),
            row("ceiling-downpour-1x2-t1", report.CEILING, 20_000)]
    rows += [row(f"downpour-1x2-t1-p{n}", samples=samples, n_push=n, **changes) for n, samples in MEASURED.items()]
    return rows


def test_compute_per_example_comes_from_the_ceiling_and_the_baseline_for_other_threads():
    assert study_model.compute_seconds_per_example(study_rows()) == pytest.approx({1: 1e-4, 2: 1 / 11_000})


def test_the_fit_recovers_the_constants_and_predicts_each_configuration_left_out():
    model = study_model.fit_study(study_rows())
    assert model.constants.overlap["downpour"] == 0
    assert model.constants.message_seconds["downpour"] == pytest.approx(0.01)
    assert [label for label, _ in model.predictions] == ["downpour-1x2-t1-p1", "downpour-1x2-t1-p4",
                                                         "downpour-1x2-t1-p16"]
    for (_, prediction), measured in zip(model.predictions, MEASURED.values(), strict=True):
        assert prediction.predicted == pytest.approx(measured, rel=1e-4)  # the other two fix both constants
    assert model.median_error < 1e-4
    assert model.note.startswith("fitted to 3 configurations of this study")


def test_the_extrapolation_is_the_fitted_model_at_nominal_link_rates():
    model = study_model.fit_study(study_rows())
    # n_push 4 on 8 nodes at 10 Gbit/s: each worker sends 4,000 B / 4 + 4,000 B / 4 = 2,000 B a step; the server's
    # link carries 8 × 2,000 B / 1.25e9 B/s = 12.8 µs (more than a worker's 1.6 µs); plus 0.5 messages × 10 ms:
    # step = 10 ms + 5.0128 ms; speedup = 8 × 10 / 15.0128.
    [(_, _, _, rate, speedup)] = [entry for entry in model.extrapolation
                                  if entry[:3] == ("downpour-1x2-t1-p4", 8, "10 Gbit/s")]
    assert speedup == pytest.approx(8 * 10 / 15.0128, rel=1e-5)
    assert rate == pytest.approx(8 * 100 / 0.0150128, rel=1e-5)
    assert len(model.extrapolation) == 3 * 3 * 3  # configurations × nodes × links
    text = study_model.markdown(model)
    assert "Model output, not measured" in text and "| downpour-1x2-t1-p4 |" in text
    assert study_model.predictions_csv(model).splitlines()[0] == \
        "configuration,measured_samples_per_second,predicted_left_out,relative_error"
    assert len(study_model.extrapolation_csv(model).splitlines()) == 1 + 27


def test_a_study_too_small_or_without_model_sizes_is_not_fitted_and_says_why():
    one = study_model.fit_study(study_rows()[:3])
    assert one.constants is None and one.predictions == () and one.median_error is None
    assert one.note.startswith("not fitted: 1 configuration(s)")
    unsized = study_model.fit_study(study_rows(parameters=0))
    assert unsized.constants is None and "model_parameters" in unsized.note
    assert "not fitted" in study_model.markdown(unsized)


# A study with link profiles: the same 2 workers, n_push 4, a model of 1,000,000 parameters (4 MB), at three
# shaped rates. Truth: the link delivers half its nominal rate (efficiency 0.5), no cost per message, no overlap.
# A step sends 4e6 B / 4 + 4e6 B / 4 = 2e6 B (push + fetch), computes 10 ms:
#   100mbit: 1.25e7 B/s × 0.5 → 2e6 / 6.25e6 = 320 ms → step 330 ms  → 2 × 100 / 0.330 =    606.06 samples/s
#   1gbit:   1.25e8 B/s × 0.5 →                 32 ms → step  42 ms  → 2 × 100 / 0.042 =  4,761.90
#   10gbit:  1.25e9 B/s × 0.5 →                3.2 ms → step 13.2 ms → 2 × 100 / 0.0132 = 15,151.52
SHAPED = {"100mbit": 606.0606, "1gbit": 4_761.905, "10gbit": 15_151.52}


def shaped_rows(link_rates=tuple(SHAPED)):
    rows = [row("baseline-1x1", report.BASELINE, 11_000, workers=1, threads=2),
            row("ceiling-downpour-1x2-t1", report.CEILING, 20_000)]
    for link in link_rates:
        rows.append(row(f"downpour-1x2-t1-p4-{link}", samples=SHAPED[link], parameters=1_000_000))
        rows[-1].link_rate = link
    return rows


def test_with_link_profiles_the_fit_finds_the_links_efficiency_from_the_shaped_rates():
    model = study_model.fit_study(shaped_rows())
    assert model.constants.efficiency == pytest.approx(0.5)
    assert model.constants.message_seconds["downpour"] == 0 and model.constants.overlap["downpour"] == 0
    for (label, prediction), measured in zip(model.predictions, SHAPED.values(), strict=True):
        assert prediction.predicted == pytest.approx(measured, rel=1e-3), label  # the other two rates fix it
    assert "links at their 3 shaped rates, efficiency 0.50" in model.note


def test_without_link_profiles_the_link_is_not_fitted():
    rows = shaped_rows()
    for entry in rows:
        entry.link_rate = ""
    model = study_model.fit_study(rows)
    assert model.constants.efficiency == 1.0 and "links unlimited, one network" in model.note
