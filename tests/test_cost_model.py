"""The cost model's arithmetic against cases computed by hand, and its fit against data it generated itself.
(Its byte counts are also checked against what the cluster bench's strategies counted, 2026-12-02.)"""

from __future__ import annotations

import pytest

from training.study.cost_model import (
    Configuration,
    Constants,
    bytes_per_step,
    extrapolate,
    fit,
    leave_one_out,
    median_error,
    samples_per_second,
    speedup,
    step_seconds,
)

MNIST_CNN = 225_034  # parameters of the MNIST CNN


def mnist(strategy: str, **changes) -> Configuration:
    settings = {"workers": 3, "parameters": MNIST_CNN, "batch_per_worker": 128, "link_bytes_per_second": 1.25e9,
                "steps_per_epoch": 312, **changes}
    return Configuration(strategy, **settings)


def test_bytes_per_step_by_hand_and_as_the_strategies_counted_them_on_the_cluster():
    weights = 4 * MNIST_CNN  # 900,136 bytes
    assert bytes_per_step(mnist("horovod")) == pytest.approx(2 * 2 / 3 * weights)  # 1,200,181.3
    assert bytes_per_step(mnist("horovod", fp16_compression=True)) == pytest.approx(2 / 3 * weights)
    assert bytes_per_step(mnist("downpour", n_push=4, n_fetch=4)) == pytest.approx(450_068)
    assert bytes_per_step(mnist("downpour", n_push=16, n_fetch=1)) == pytest.approx(weights / 16 + weights)
    assert bytes_per_step(mnist("averaging", rounds_per_epoch=4)) == pytest.approx(2 * weights * 4 / 312)
    # bench/cluster_links.py, 3 workers × 312 steps × 6 epochs: Horovod's ring 6,740,218,368 bytes (what the bench
    # computes) and averaging 129,619,584 bytes (what the strategy counted).
    steps = 3 * 312 * 6
    assert bytes_per_step(mnist("horovod")) * steps == pytest.approx(6_740_218_368)
    assert bytes_per_step(mnist("averaging")) * steps == pytest.approx(129_619_584)


def test_step_time_by_hand():
    constants = Constants({1: 1e-4}, efficiency=0.5, overlap={"horovod": 0.0, "downpour": 1.0})
    ring = Configuration("horovod", workers=2, parameters=1_000_000, batch_per_worker=128,
                         link_bytes_per_second=1e8, latency_seconds=0.001)
    # compute 128 × 1e-4 = 0.0128 s; ring 4 MB at 0.5 × 100 MB/s = 0.08 s; 2 messages × 1 ms
    assert step_seconds(ring, constants) == pytest.approx(0.0128 + 0.08 + 0.002)
    assert samples_per_second(ring, constants) == pytest.approx(2 * 128 / 0.0948)
    pushes = Configuration("downpour", workers=2, parameters=1_000_000, batch_per_worker=128,
                           link_bytes_per_second=1e8, latency_seconds=0.001, n_push=1, n_fetch=1)
    # 8 MB at 50 MB/s = 0.16 s + 2 ms; fully overlapped: the step is the longer of the two
    assert step_seconds(pushes, constants) == pytest.approx(0.162)
    fast_link = Configuration("downpour", workers=2, parameters=1_000, batch_per_worker=128,
                              link_bytes_per_second=1e9, n_push=1, n_fetch=1)
    assert step_seconds(fast_link, constants) == pytest.approx(0.0128)  # 8 kB hides inside the compute
    assert speedup(fast_link, constants) == pytest.approx(2.0)


def test_a_messages_own_work_is_never_hidden_while_the_wire_is():
    constants = Constants({1: 1e-4}, overlap={"downpour": 1.0, "horovod": 0.5},
                          message_seconds={"downpour": 0.004, "horovod": 0.001})
    pushes = Configuration("downpour", workers=2, parameters=1_000_000, batch_per_worker=128,
                           link_bytes_per_second=1e9, n_push=4, n_fetch=4)
    # compute 12.8 ms; 0.5 messages × 4 ms = 2 ms of work; wire 2 MB at 1 GB/s = 2 ms, hidden by the compute
    assert step_seconds(pushes, constants) == pytest.approx(0.0128 + 0.002)
    slow = Configuration("downpour", workers=2, parameters=1_000_000, batch_per_worker=128,
                         link_bytes_per_second=1e8, n_push=4, n_fetch=4)
    # the wire now takes 20 ms: 12.8 ms of it hidden, 7.2 ms shows
    assert step_seconds(slow, constants) == pytest.approx(0.0128 + 0.002 + 0.0072)
    ring = Configuration("horovod", workers=2, parameters=1_000_000, batch_per_worker=128,
                         link_bytes_per_second=1e8)
    # ring 4 MB at 100 MB/s = 40 ms, half the compute (6.4 ms) hides it; 2 messages × 1 ms
    assert step_seconds(ring, constants) == pytest.approx(0.0128 + 0.002 + (0.040 - 0.0064))


def test_a_strategys_own_compute_comes_before_the_shared_one():
    constants = Constants({1: 1e-4}, strategy_seconds_per_example={("downpour", 1): 5e-5})
    assert constants.compute_seconds(mnist("downpour", workers=1)) == pytest.approx(128 * 5e-5)
    assert constants.compute_seconds(mnist("horovod", workers=1)) == pytest.approx(128 * 1e-4)


def test_downpours_server_link_carries_every_workers_share():
    constants = Constants({1: 1e-4}, efficiency=0.5, overlap={"downpour": 1.0})
    pushes = Configuration("downpour", workers=8, parameters=1_000_000, batch_per_worker=128,
                           link_bytes_per_second=1e8, n_push=4, n_fetch=4, server_link_bytes_per_second=1e8)
    # a worker: 2 MB per step at 50 MB/s = 0.04 s; the server: 8 × 2 MB = 16 MB at 50 MB/s = 0.32 s, the bound
    assert step_seconds(pushes, constants) == pytest.approx(0.32)
    unshaped = Configuration("downpour", workers=8, parameters=1_000_000, batch_per_worker=128,
                             link_bytes_per_second=1e8, n_push=4, n_fetch=4)
    assert step_seconds(unshaped, constants) == pytest.approx(0.04)  # the namespace cluster's driver side
    with pytest.raises(ValueError, match="positive rate"):
        Configuration("downpour", workers=2, parameters=1, batch_per_worker=1, link_bytes_per_second=1e8,
                      server_link_bytes_per_second=0)


def test_one_horovod_worker_does_not_communicate():
    constants = Constants({1: 1e-4})
    alone = mnist("horovod", workers=1, link_bytes_per_second=1.0)
    assert step_seconds(alone, constants) == pytest.approx(0.0128)
    assert speedup(alone, constants) == pytest.approx(1.0)


def synthetic_grid(truth: Constants) -> list[tuple[Configuration, float]]:
    grid = []
    for rate in (1.25e9, 1.25e8, 1.25e7):
        for configuration in (mnist("horovod", link_bytes_per_second=rate),
                              mnist("downpour", n_push=1, n_fetch=1, link_bytes_per_second=rate),
                              mnist("downpour", n_push=4, n_fetch=4, link_bytes_per_second=rate),
                              mnist("averaging", link_bytes_per_second=rate)):
            grid.append((configuration, samples_per_second(configuration, truth)))
    return grid


def test_the_fit_recovers_the_constants_that_made_the_data_and_predicts_each_left_out_run():
    truth = Constants({1: 3e-4}, efficiency=0.6, overlap={"horovod": 0.0, "downpour": 1.0, "averaging": 0.5},
                      message_seconds={"horovod": 1e-3, "downpour": 1e-2})
    grid = synthetic_grid(truth)
    fitted = fit(grid, {1: 3e-4}, efficiency=0.6)
    assert fitted.overlap["horovod"] == 0.0
    assert fitted.overlap["downpour"] == 1.0  # fixed, not fitted: its client is asynchronous
    assert (fitted.message_seconds["horovod"], fitted.message_seconds["downpour"]) == pytest.approx((1e-3, 1e-2))
    # Averaging's few bytes hide inside the compute at any overlap above a small one: the data cannot say which,
    # and every one of them predicts the same.
    for configuration, measured in grid:
        assert samples_per_second(configuration, fitted) == pytest.approx(measured)
    predictions = leave_one_out(grid, {1: 3e-4}, efficiency=0.6)
    assert len(predictions) == len(grid)
    assert median_error(predictions) < 1e-9


def test_a_configuration_whose_strategy_has_no_other_communicating_run_is_not_predicted():
    truth = Constants({1: 3e-4}, message_seconds={"horovod": 1e-3, "downpour": 1e-2})
    shapes = [mnist("horovod"), mnist("horovod", workers=1), mnist("downpour", n_push=1, n_fetch=1),
              mnist("downpour", n_push=4, n_fetch=4)]
    predictions = leave_one_out([(shape, samples_per_second(shape, truth)) for shape in shapes], {1: 3e-4})
    # Horovod 3 workers: the other Horovod run is one worker, which sends nothing, so nothing tells its costs.
    assert predictions[0].predicted is None and predictions[0].relative_error is None
    assert [p.relative_error for p in predictions[1:]] == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    assert median_error(predictions) == pytest.approx(0.0, abs=1e-9)
    assert median_error(predictions[:1]) != median_error(predictions[:1])  # nan: nothing was predicted


def test_extrapolation_labels_each_row_with_its_shape():
    constants = Constants({1: 3e-4}, efficiency=0.6, overlap={"horovod": 0.0})
    rows = extrapolate(mnist("horovod"), constants, workers=[8, 64], link_rates=[1.25e8, 3.125e9])
    assert [(workers, rate) for workers, rate, _, _ in rows] == [(8, 1.25e8), (8, 3.125e9), (64, 1.25e8),
                                                                 (64, 3.125e9)]
    by_shape = {(workers, rate): speed for workers, rate, _, speed in rows}
    assert by_shape[(64, 3.125e9)] > by_shape[(64, 1.25e8)]  # a faster link never hurts
    assert all(0 < speed <= workers for workers, _, _, speed in rows)  # never better than linear


@pytest.mark.parametrize(("changes", "message"), [
    ({"strategy": "elephas"}, "strategy must be one of"), ({"workers": 0}, "workers must be ≥ 1"),
    ({"n_push": 0}, "n_push must be ≥ 1"), ({"link_bytes_per_second": 0.0}, "positive rate"),
    ({"latency_seconds": -1.0}, "latency ≥ 0")])
def test_bad_configurations_are_refused_naming_the_setting(changes, message):
    settings = {"strategy": "horovod", "workers": 2, "parameters": 10, "batch_per_worker": 1,
                "link_bytes_per_second": 1.0, **changes}
    with pytest.raises(ValueError, match=message):
        Configuration(**settings)


def test_a_thread_count_without_a_compute_measurement_is_named():
    with pytest.raises(ValueError, match=r"no compute measurement for 2 thread\(s\) per worker \(have \[1\]\)"):
        step_seconds(mnist("horovod", threads_per_worker=2), Constants({1: 1e-4}))
    with pytest.raises(ValueError, match="nothing to fit"):
        fit([], {1: 1e-4})
