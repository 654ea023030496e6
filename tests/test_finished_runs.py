"""A finished run is a no-op only on the data it trained on: after its dataset is rebuilt or renamed (a new
dataset layout, an ingest with --overwrite), the same run name is refused in one line instead of reporting the old
figures as if they were the new data's."""

from __future__ import annotations

import pytest

from training import storage
from training.config import RunSpec
from training.contract import RESULT_FILE
from training.jobs.train import claim_run_directory, previous_result
from training.settings import RunSpecError


def test_a_finished_run_is_reused_on_its_data_and_refused_on_other_data(tmp_path):
    spec = RunSpec(data_root=str(tmp_path), run_name="finished")
    assert claim_run_directory(spec) is None
    record = {"result": {}, "data_version": "aaaa1111", "mlflow_run_id": "0123"}
    storage.write_json(storage.join(spec.run_uri(), RESULT_FILE), record)
    same = {"uri": spec.augmented_uri(), "data_version": "aaaa1111"}
    assert previous_result(spec, same) == record
    assert previous_result(spec) == record  # without the data's manifest: read only, as before
    rebuilt = {"uri": spec.augmented_uri(), "data_version": "bbbb2222"}
    with pytest.raises(RunSpecError) as refused:
        previous_result(spec, rebuilt)
    message = str(refused.value)
    assert "\n" not in message and "aaaa1111" in message and "bbbb2222" in message and spec.run_uri() in message


def test_a_run_tracked_in_another_store_is_refused_in_one_line_and_one_in_this_store_is_returned(tmp_path):
    from training import tracking

    spec = RunSpec(data_root=str(tmp_path / "data"), run_name="elsewhere",
                   tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(RunSpecError) as refused:  # the data says "tracked", the store has never heard of it
        tracking.tracked_run(spec, "0123456789abcdef0123456789abcdef")
    message = str(refused.value)
    assert "\n" not in message and "0123456789abcdef0123456789abcdef" in message
    assert spec.resolved_tracking_uri() in message and "run_name" in message
    mlflow_client = tracking.client(spec.resolved_tracking_uri())
    experiment = mlflow_client.create_experiment("here")
    run = mlflow_client.create_run(experiment)
    assert tracking.tracked_run(spec, run.info.run_id).info.run_id == run.info.run_id
