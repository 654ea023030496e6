"""The ceiling: each strategy's own workers, data path and training loop with communication off, on a small slice
of the real MNIST (real Spark local[2], Horovod over Gloo, the Downpour worker processes); nothing is sent, and
every worker still learns on its own shard."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pipeline_data import prepare_datasets

from training import storage
from training.config import RunSpec
from training.strategies import bookkeeping
from training.strategies.averaging import AveragingStrategy
from training.strategies.base import EvaluationSet, TrainingResult
from training.strategies.downpour import DownpourStrategy
from training.strategies.downpour_worker import SNAPSHOTS_FILE, TrainingClock, WorkerAlone
from training.strategies.horovod import HorovodStrategy

CHANCE = 0.1  # ten digits
# 1,000 images (k=1: 2,000 examples) over 2 workers, 2 epochs at batch 32: about 60 steps per worker. With
# communication the strategies' tests reach 0.6–0.95 on the same slice; a lone worker's model is far above chance.
LEARNED = 0.4


def test_communication_is_a_run_setting_on_by_default_that_travels_to_every_job():
    assert RunSpec().communication is True
    ceiling = RunSpec(communication=False)
    args = ceiling.to_args()
    assert args[args.index("--communication") + 1] == "false"
    assert RunSpec.from_mapping({"communication": "false"}) == ceiling
    assert ceiling.mlflow_params()["communication"] == "false"


def test_independent_workers_add_their_rates():
    # by hand: 100 samples in 1 s and 100 in 2 s are 100 + 50 = 150 samples/s, so 200 samples take 4/3 s
    assert bookkeeping.independent_epoch_seconds([100, 100], [1.0, 2.0]) == pytest.approx(4 / 3)
    assert bookkeeping.independent_epoch_seconds([300], [3.0]) == 3.0
    with pytest.raises(ValueError, match="2 sample counts for 1 durations"):
        bookkeeping.independent_epoch_seconds([1, 2], [1.0])


@pytest.fixture(scope="module")
def small_spec(spark, tmp_path_factory) -> RunSpec:
    root = tmp_path_factory.mktemp("ceiling")
    spec = RunSpec(train_limit=1000, test_limit=400, epochs=2, batch_size_per_worker=32, workers_per_node=2,
                   communication=False, data_root=str(root / "data"), run_name="ceiling")
    prepare_datasets(spark, spec)
    return spec


def train(strategy, spec: RunSpec, spark) -> TrainingResult:
    return strategy.train(spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri()), spec.run_uri(),
                          spark)


def assert_learned_alone(result: TrainingResult, spec: RunSpec) -> None:
    assert result.extra["communication"] is False
    assert [row["epoch"] for row in result.epochs] == list(range(1, spec.epochs + 1))
    assert len(result.evaluations) == spec.epochs * spec.evaluations_per_epoch
    assert result.epochs[-1]["val_accuracy"] > LEARNED > CHANCE
    assert all(row["samples_per_second"] > 0 for row in result.epochs)
    assert (Path(storage.resolve(result.model_uri).path) / "weights.npz").is_file()


@pytest.mark.spark
def test_horovod_ranks_without_communication_train_apart_and_learn(spark, small_spec):
    spec = small_spec.with_changes(strategy="horovod", run_name="ceiling-horovod")
    result = train(HorovodStrategy(), spec, spark)
    assert_learned_alone(result, spec)
    assert result.metrics["bytes_moved"] == 0
    # With communication every rank ends with rank 0's weights; without broadcast or all-reduce, each its own.
    digests = result.extra["weights_sha256_per_rank"]
    assert len(digests) == 2 and digests[0] != digests[1]
    assert result.extra["ranks_in_sync"] is False


@pytest.mark.spark
def test_downpour_workers_without_communication_never_touch_a_server_and_learn(spark, small_spec):
    spec = small_spec.with_changes(strategy="downpour", run_name="ceiling-downpour")
    result = train(DownpourStrategy(), spec, spark)
    assert_learned_alone(result, spec)
    assert result.metrics["pushes"] == result.metrics["fetches"] == result.metrics["bytes_moved"] == 0
    assert result.metrics["lost_workers"] == 0 and result.metrics["communication_fraction"] == 0
    assert {worker["bytes_sent"] + worker["bytes_received"] for worker in result.extra["workers"]} == {0}
    # 1,000 examples per worker at batch 32: 31 steps each, every step of both workers taken.
    assert [worker["steps"] for worker in result.extra["workers"]] == [31 * spec.epochs] * 2
    seconds = [evaluation["train_seconds"] for evaluation in result.evaluations]
    assert seconds == sorted(seconds) and seconds[0] > 0


@pytest.mark.spark
def test_averaging_without_communication_averages_nothing_and_learns(spark, small_spec):
    spec = small_spec.with_changes(strategy="averaging", run_name="ceiling-averaging")
    result = train(AveragingStrategy(), spec, spark)
    assert_learned_alone(result, spec)
    assert result.metrics["bytes_moved"] == 0
    # Only worker 0's weights come back, once a round, to be evaluated.
    rounds = spec.epochs * spec.rounds_per_epoch
    assert result.metrics["evaluation_bytes"] > 0 and result.metrics["evaluation_bytes"] % rounds == 0
    # Spark runs a rank's round in another Python worker now and then; with one executor (local mode) it finds the
    # weights the rank left after its last round, so every rank goes on from its own last round, as an independent
    # process would (before those files, 4–10 of these 14 rank-rounds restarted from an older model).
    assert result.extra["worker_rounds_not_continued"] == 0


class CountingReplica:
    """A stand-in for downpour_replica.Replica: its parameters are the number of gradients taken so far."""

    def __init__(self) -> None:
        self.gradients_taken = 0

    def take_accumulated(self) -> None:
        self.gradients_taken += 1

    def parameters(self) -> SimpleNamespace:  # like a tensor: .numpy()
        values = np.array([self.gradients_taken], np.float32)
        return SimpleNamespace(numpy=lambda: values)


def test_a_downpour_worker_alone_takes_its_gradient_every_n_push_steps_sends_nothing_and_keeps_its_snapshots(
        tmp_path):
    spec = RunSpec(strategy="downpour", communication=False, n_push=3)
    replica, clock = CountingReplica(), TrainingClock()
    alone = WorkerAlone(spec, replica, clock, snapshot_at={4: 0.5, 8: 1.0})
    assert alone.join() == 0
    clock.start()
    for _ in range(8):
        alone.before_step()
        alone.after_step()
    alone.finish()  # nothing to push: the 2 steps since the last take stay unsent
    assert (alone.steps, replica.gradients_taken) == (8, 2)
    assert alone.traffic() == {"bytes_sent": 0, "bytes_received": 0, "communication_seconds": 0.0}
    alone.leave_snapshots(tmp_path / SNAPSHOTS_FILE)
    with np.load(tmp_path / SNAPSHOTS_FILE) as saved:
        assert saved["positions"].tolist() == [0.5, 1.0]
        assert saved["parameters"].tolist() == [[1.0], [2.0]]  # after steps 4 and 8: 1, then 2 gradients taken
        assert 0 < saved["clock"][0] <= saved["clock"][1]
