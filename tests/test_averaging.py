"""MapReduce model averaging: the exact example-weighted mean, and real rounds of Spark tasks on a small slice."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pipeline_data import prepare_datasets

from training import storage
from training.config import RunSpec
from training.models.model_files import load_model
from training.strategies.averaging import AveragingStrategy, _worker_round, train_in_rounds, weighted_average
from training.strategies.base import EvaluationSet


def test_average_is_the_exact_mean_weighted_by_examples_seen():
    first = [np.array([1.0, 2.0], np.float32), np.array([[10.0]], np.float32)]
    second = [np.array([4.0, -1.0], np.float32), np.array([[40.0]], np.float32)]
    averaged = weighted_average([first, second], examples_seen=[100, 300])
    # by hand: (100·1 + 300·4)/400 = 3.25, (100·2 − 300)/400 = −0.25, (100·10 + 300·40)/400 = 32.5
    assert averaged[0].tolist() == [3.25, -0.25]
    assert averaged[1].tolist() == [[32.5]]
    assert averaged[0].dtype == np.float32
    unweighted = (first[0] + second[0]) / 2  # what dividing by the number of workers would give
    assert not np.allclose(averaged[0], unweighted)


def test_equal_counts_give_the_plain_mean_and_bad_counts_are_rejected():
    sets = [[np.full(3, value, np.float32)] for value in (1.0, 2.0, 6.0)]
    assert weighted_average(sets, [5, 5, 5])[0].tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="positive total"):
        weighted_average(sets, [0, 0, 0])
    with pytest.raises(ValueError, match="3 weight sets for 2"):
        weighted_average(sets, [1, 2])


@pytest.mark.spark
def test_two_workers_average_their_way_to_a_useful_model(spark, tmp_path):
    spec = RunSpec(strategy="averaging", train_limit=1000, test_limit=400, epochs=2, batch_size_per_worker=32,
                   workers_per_node=2, data_root=str(tmp_path / "data"), run_name="averaging")
    prepare_datasets(spark, spec)
    result = AveragingStrategy().train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()),
                                       spec.run_uri(), spark)
    assert [row["epoch"] for row in result.epochs] == [1, 2]
    assert len(result.evaluations) == spec.epochs * spec.evaluations_per_epoch
    assert result.extra["rounds_per_epoch"] == spec.rounds_per_epoch
    assert result.epochs[-1]["val_accuracy"] > 0.7  # 1,000 images, 2 epochs: far above chance (0.1)
    assert result.metrics["bytes_moved"] > 0
    assert (Path(storage.resolve(result.model_uri).path) / "weights.npz").is_file()


def rounds_in_this_process(spec: RunSpec):
    """Each round's worker tasks run here one after another: the same work as the Spark tasks, without Spark's
    choice of which Python worker (and so which optimizer state) runs which rank."""
    def run_round(weights, epoch, round_index):
        return [result for rank in range(spec.total_workers)
                for result in _worker_round(iter([rank]), spec.to_mapping(), spec.shards_uri(),
                                            SimpleNamespace(value=weights), epoch, round_index, threads=1)]
    return run_round


def two_tiny_workers(spark, tmp_path: Path, epochs: int) -> RunSpec:
    """Two workers, 64 images each, two rounds an epoch: its datasets prepared."""
    spec = RunSpec(strategy="averaging", train_limit=128, test_limit=40, augment_copies=0, epochs=epochs,
                   batch_size_per_worker=16, workers_per_node=2, rounds_per_epoch=2, data_root=str(tmp_path / "data"))
    prepare_datasets(spark, spec)
    return spec


@pytest.mark.spark
def test_each_worker_trains_with_the_worker_optimizer_setting(spark, tmp_path):
    from training.strategies import averaging

    spec = two_tiny_workers(spark, tmp_path, epochs=1)
    returned = {}
    for name, expected in [("adam", "Adam"), ("adagrad", "Adagrad"), ("momentum", "SGD"), ("sgd", "SGD")]:
        chosen = spec.with_changes(worker_optimizer=name, learning_rate=0.05, run_name=name)
        [result] = rounds_in_this_process(chosen)(None, 0, 0)[:1]
        [state] = [state for (run, rank), state in averaging._worker_state.items()
                   if rank == 0 and run.startswith(chosen.to_json())]
        optimizer = state.model.optimizer
        assert type(optimizer).__name__ == expected, name
        assert float(getattr(optimizer, "momentum", 0.0)) == pytest.approx(0.9 if name == "momentum" else 0.0), name
        returned[name] = np.concatenate([weights.ravel() for weights in result["weights"]])
    # Same data, same start, same rate: four rules, four different models after one round.
    assert len({digest.tobytes() for digest in returned.values()}) == 4


@pytest.mark.spark
def test_how_often_accuracy_is_measured_does_not_change_what_is_trained(spark, tmp_path):
    spec = two_tiny_workers(spark, tmp_path, epochs=2)
    trained = {}
    for every in (1, 3):
        measured = spec.with_changes(evaluations_per_epoch=every, run_name=f"evaluated-{every}-per-epoch")
        trained[every] = train_in_rounds(measured, EvaluationSet(measured.augmented_uri()), measured.run_uri(),
                                         rounds_in_this_process(measured), threads=1)
    once, thrice = trained[1], trained[3]
    # Once per epoch: after round 2 of 2. Three points (2/3, 4/3, 2 rounds): after round 1 and after round 2.
    assert [evaluation["epoch"] for evaluation in once.evaluations] == [1.0, 2.0]
    assert [evaluation["epoch"] for evaluation in thrice.evaluations] == [0.5, 1.0, 1.5, 2.0]
    assert once.extra["rounds_per_epoch"] == thrice.extra["rounds_per_epoch"] == 2
    for first, second in zip(load_model(once.model_uri).get_weights(), load_model(thrice.model_uri).get_weights(),
                             strict=True):
        np.testing.assert_array_equal(first, second)
    assert [row["val_accuracy"] for row in once.epochs] == [row["val_accuracy"] for row in thrice.epochs]
