"""The cost model fitted to a study's own rows: compute per example from its ceiling, constants recovered from
runs the model itself generated, each configuration predicted with it left out, and the extrapolation — every
figure hand-computed below."""

from __future__ import annotations

import pytest

from training.study import report, study_model

# The study's truth: one 1-thread worker computes an example in 0.1 ms; Downpour pays 10 ms of work per message
# (links unlimited, so nothing waits on the wire). Batch 100: a step computes 100 × 0.1 ms = 10 ms.
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
    assert study_model.compute_seconds_per_example_by_strategy(study_rows()) == pytest.approx({("downpour", 1): 1e-4})


def test_the_fit_recovers_the_constants_and_predicts_each_configuration_left_out():
    model = study_model.fit_study(study_rows())
    assert model.constants.overlap["downpour"] == 1  # fixed: its client is asynchronous
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
    # link carries 8 × 2,000 B / 1.25e9 B/s = 12.8 µs (more than a worker's 1.6 µs), hidden by the 10 ms of
    # compute; 0.5 messages × 10 ms of work is not: step = 10 ms + 5 ms; speedup = 8 × 10 / 15.
    [(_, _, _, rate, speedup)] = [entry for entry in model.extrapolation
                                  if entry[:3] == ("downpour-1x2-t1-p4", 8, "10 Gbit/s")]
    assert speedup == pytest.approx(8 * 10 / 15, rel=1e-5)
    assert rate == pytest.approx(8 * 100 / 0.015, rel=1e-5)
    # at 64 nodes and 1 Gbit/s the server's link carries 64 × 2,000 B / 1.25e8 B/s = 1.024 ms: still hidden
    [(_, _, _, _, crowded)] = [entry for entry in model.extrapolation
                               if entry[:3] == ("downpour-1x2-t1-p4", 64, "1 Gbit/s")]
    assert crowded == pytest.approx(64 * 10 / 15, rel=1e-5)
    assert len(model.extrapolation) == 3 * 3 * 3  # configurations × nodes × links
    text = study_model.markdown(model)
    assert "Model output, not measured" in text and "| downpour-1x2-t1-p4 |" in text
    assert "downpour overlap 1.00 (fixed: asynchronous), cost per message 10.00 ms" in text
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
# shaped rates, taken at their nominal rates. Truth: 10 ms of work per message. A step sends 4e6 B / 4 + 4e6 B / 4
# = 2e6 B (push + fetch), computes 10 ms, which hides as much of the wire (Downpour's overlap is 1), and does
# 0.5 messages × 10 ms = 5 ms of message work:
#   100mbit: 2e6 B / 1.25e7 B/s = 160 ms on the wire → step 10 + 5 + 150 = 165 ms → 2 × 100 / 0.165 =  1,212.12
#   1gbit:   2e6 B / 1.25e8 B/s =  16 ms             → step 10 + 5 + 6   =  21 ms → 2 × 100 / 0.021 =  9,523.81
#   10gbit:  2e6 B / 1.25e9 B/s = 1.6 ms (hidden)    → step 10 + 5       =  15 ms → 2 × 100 / 0.015 = 13,333.33
SHAPED = {"100mbit": 1_212.121, "1gbit": 9_523.810, "10gbit": 13_333.33}


def shaped_rows(link_rates=tuple(SHAPED)):
    rows = [row("baseline-1x1", report.BASELINE, 11_000, workers=1, threads=2),
            row("ceiling-downpour-1x2-t1", report.CEILING, 20_000)]
    for link in link_rates:
        rows.append(row(f"downpour-1x2-t1-p4-{link}", samples=SHAPED[link], parameters=1_000_000))
        rows[-1].link_rate = link
    return rows


def test_with_link_profiles_each_run_is_fitted_at_its_shaped_rate():
    model = study_model.fit_study(shaped_rows())
    assert model.constants.efficiency == 1.0
    assert model.constants.message_seconds["downpour"] == pytest.approx(0.01)
    for (label, prediction), measured in zip(model.predictions, SHAPED.values(), strict=True):
        assert prediction.predicted == pytest.approx(measured, rel=1e-3), label  # the other two rates fix it
    assert "links at their 3 shaped rates (nominal)" in model.note


def test_without_link_profiles_the_link_is_not_fitted():
    rows = shaped_rows()
    for entry in rows:
        entry.link_rate = ""
    model = study_model.fit_study(rows)
    assert model.constants.efficiency == 1.0 and "links unlimited, one network" in model.note


def test_each_strategy_computes_at_its_own_ceilings_rate_and_a_lone_strategy_is_not_predicted():
    # Horovod's ceiling runs 12,500 samples/s (0.16 ms per example: step 16 ms), Downpour's 20,000 (10 ms).
    # The one Horovod run has nothing of its strategy to be predicted from; the Downpour runs predict each other.
    rows = study_rows() + [row("ceiling-horovod-1x2-t1", report.CEILING, 12_500),
                           row("horovod-1x2-t1", samples=11_111.11)]
    for entry in rows[-2:]:
        entry.strategy = "horovod"
    model = study_model.fit_study(rows)
    assert study_model.compute_seconds_per_example_by_strategy(rows) == pytest.approx(
        {("downpour", 1): 1e-4, ("horovod", 1): 1.6e-4})
    # Horovod fitted to its one run: 2 workers × 100 / 11,111.11 = 18 ms a step, 16 ms of it compute, 2 messages
    # of 1 ms each, the wire unlimited
    assert model.constants.message_seconds["horovod"] == pytest.approx(1e-3)
    predictions = dict(model.predictions)
    assert predictions["horovod-1x2-t1"].predicted is None
    assert [predictions[label].relative_error for label in ("downpour-1x2-t1-p1", "downpour-1x2-t1-p4",
                                                              "downpour-1x2-t1-p16")] == pytest.approx([0, 0, 0],
                                                                                                       abs=1e-4)
    assert "leave-one-out median error 0.0%, largest 0.0%, over 3 configuration(s)" in model.note
    assert "not predicted: horovod-1x2-t1 (no other configuration of its strategy that communicates)" in model.note
    assert "horovod-1x2-t1,11111.1,not predicted," in study_model.predictions_csv(model)
    assert "| horovod-1x2-t1 | 11,111 | not predicted" in study_model.markdown(model)


def test_a_study_of_lone_strategies_predicts_nothing_and_says_so():
    rows = [row("baseline-1x1", report.BASELINE, 11_000, workers=1, threads=2),
            row("ceiling-downpour-1x2-t1", report.CEILING, 20_000), row("downpour-1x2-t1-p4", samples=13_333.333),
            row("horovod-1x2-t1", samples=11_111.11)]
    rows[-1].strategy = "horovod"
    model = study_model.fit_study(rows)
    assert model.median_error is None  # so the parent run logs no cost_model_median_error
    assert "no configuration could be predicted leaving it out; not predicted: downpour-1x2-t1-p4, horovod-1x2-t1" \
        in model.note
