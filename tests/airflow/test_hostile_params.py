"""The Airflow side of issue 39: the form's run-name and study-name rules are the settings' rules (pattern and
length), Params and a study's mapped settings are JSON (a string for an integer is refused in one line), and names
derived from long DAG run ids fit every configuration's run name."""

from __future__ import annotations

import re

import pytest

from training.config import RunSpecError
from training.settings import RUN_NAME_MAX_LENGTH
from training.study.plan import STUDY_NAME_MAX_LENGTH

DAG_ID = "mnist_elastic_cnn"
LONG_RUN_ID = "manual__" + "x" * 240


def context_for(**params):
    from cloudburst_params import run_params

    values = {name: param.value for name, param in run_params(DAG_ID).items()}
    return {"params": {**values, **params}, "run_id": "manual__2026-11-30T10:00:00+00:00"}


def test_the_form_s_run_name_may_be_empty_or_a_valid_name_of_at_most_the_cap():
    from cloudburst_params import run_params

    schema = run_params(DAG_ID)["run_name"].schema
    assert schema["maxLength"] == RUN_NAME_MAX_LENGTH and schema["type"] == ["null", "string"]
    for accepted in ("", "manual", "demo-horovod-1x2"):
        assert re.search(schema["pattern"], accepted), accepted
    for refused in ("..", ".", ".hidden", "-x", "a/b"):
        assert not re.search(schema["pattern"], refused), refused


def test_the_study_form_caps_its_name_so_every_run_name_fits():
    from cloudburst_study import study_params

    schema = study_params()["study_name"].schema
    assert schema["maxLength"] == STUDY_NAME_MAX_LENGTH
    assert re.search(schema["pattern"], "") and not re.search(schema["pattern"], "..")


def test_names_from_long_dag_run_ids_fit_their_caps():
    from cloudburst_operators import run_spec
    from cloudburst_study import default_study_name

    assert len(default_study_name(LONG_RUN_ID)) == STUDY_NAME_MAX_LENGTH
    context = {**context_for(run_name=None), "run_id": LONG_RUN_ID}
    assert len(run_spec(context, DAG_ID).validate().run_name) == RUN_NAME_MAX_LENGTH


@pytest.mark.parametrize(("params", "message"), [
    ({"epochs": "3"}, "epochs='3': expected an integer in JSON"),
    ({"fp16_compression": "false"}, "fp16_compression='false': expected true or false in JSON"),
    ({"run_name": ".."}, "run_name='..': may hold only"),
    ({"data_root": "hdfs://host:99999"}, "data_root='hdfs://host:99999': its port must be"),
])
def test_params_are_json_and_refused_in_one_line(params, message):
    from cloudburst_operators import validate_run

    with pytest.raises(RunSpecError, match=re.escape(message)):
        validate_run(DAG_ID, **context_for(**params))


def test_a_study_s_mapped_settings_are_json_too():
    from cloudburst_operators import task_spec

    with pytest.raises(RunSpecError, match=re.escape("epochs='3': expected an integer in JSON")):
        task_spec({}, "train", "", "", {"workload": DAG_ID, "epochs": "3"})
