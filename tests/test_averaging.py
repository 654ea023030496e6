"""MapReduce model averaging: the exact example-weighted mean, and real rounds of Spark tasks on a small slice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pipeline_data import prepare_datasets

from training import storage
from training.config import RunSpec
from training.strategies.averaging import AveragingStrategy, weighted_average


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
    result = AveragingStrategy().train(spec, spec.shards_uri(), spec.augmented_uri(), spec.run_uri(), spark)
    assert [row["epoch"] for row in result.epochs] == [1, 2]
    assert len(result.evaluations) == spec.epochs * spec.evaluations_per_epoch
    assert result.epochs[-1]["val_accuracy"] > 0.7  # 1,000 images, 2 epochs: far above chance (0.1)
    assert result.metrics["bytes_moved"] > 0
    assert Path(storage.resolve(result.model_uri).path).is_file()
