"""Every command and job, given a bad argument or a missing input, answers in one line without a traceback and
writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from training import workload_registry as workloads

BAD_SETTINGS = [
    ["--workers-per-node", "0"],
    ["--epochs", "many"],
    ["--workload", "imagenet"],
    ["--learning-rate", "-1"],
    ["--run-name", "a/b"],
    ["--strategy", "magic"],
    ["--preset", "fastest"],
    ["--link-rate", "10 gbit"],
]
STEPS = ["ingest", "augment", "features", "shard", "train", "evaluate"]


def run(arguments: list[str], tmp_path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "CLOUDBURST_DATA_ROOT": str(tmp_path / "data"),
                   "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "CLOUDBURST_SPARK_UI": "false"}
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, timeout=120,
                          env=environment, cwd=tmp_path)


def assert_one_line_error(result: subprocess.CompletedProcess, tmp_path) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line or "error:" in line]
    assert errors, result.stderr[-2000:]
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("_manifest.json"))


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("bad", BAD_SETTINGS, ids=lambda bad: bad[0])
def test_every_step_rejects_a_bad_setting_in_one_line(step, bad, tmp_path):
    assert_one_line_error(run(["-m", "training.cli", step, *bad], tmp_path), tmp_path)


@pytest.mark.parametrize("step", ["augment", "features", "shard", "train", "evaluate"])
def test_every_step_with_its_input_missing_says_what_to_run_first(step, tmp_path):
    workload = "kws_densenet_bilstm" if step == "features" else "mnist_elastic_cnn"
    result = run(["-m", "training.cli", step, "--workload", workload], tmp_path)
    assert_one_line_error(result, tmp_path)
    assert "no complete dataset" in result.stderr or "no finished training" in result.stderr, result.stderr


# Every step's job module, generic or a workload's own (the speech room's features job, speaker verification's).
JOB_MODULES = sorted({workloads.definition(name).job_module(step) for name in workloads.names()
                      for step in workloads.definition(name).steps})


@pytest.mark.parametrize("job", JOB_MODULES)
def test_every_job_entry_point_rejects_a_bad_setting_in_one_line(job, tmp_path):
    assert_one_line_error(run(["-m", job, "--nodes", "0"], tmp_path), tmp_path)


@pytest.mark.parametrize("arguments", [
    ["ingest", "--data-source", "/nonexistent/mnist"],
    ["ingest", "--workload", "kws_densenet_bilstm", "--data-source", "/nonexistent/speech.tar.gz"],
    ["augment", "--workload", "kws_densenet_bilstm"],  # a step the workload does not have
    ["preview", "--source", "/nonexistent/dataset"],
    ["synth-speech", "--speakers", "0"],
    ["synth-speech", "--words", ",,,"],
    ["settings", "--workload", "imagenet"],
    ["no-such-command"],
])
def test_other_bad_input_is_one_line(arguments, tmp_path):
    assert_one_line_error(run(["-m", "training.cli", *arguments], tmp_path), tmp_path)


@pytest.mark.spark
def test_a_failed_spark_job_is_reported_as_its_root_cause_in_one_line(spark, caplog):
    """A Spark action whose tasks fail (here: every attempt divides by zero) ends the step with one line naming the
    innermost Java exception (it carries the Python worker's error), exit status 1, no Python traceback."""
    from training.jobs.command_line import run_reporting_errors

    def failing_job() -> None:
        spark.sparkContext.parallelize([1], 1).map(lambda value: value / 0).collect()

    with caplog.at_level("ERROR", logger="cloudburst"):
        assert run_reporting_errors(failing_job) == 1
    [record] = [record for record in caplog.records if record.name == "cloudburst"]
    message = record.getMessage()
    assert message.startswith("the Spark job failed: ") and "ZeroDivisionError" in message
    assert "\n" not in message


def test_an_error_that_is_not_spark_keeps_its_traceback():
    from training.jobs.command_line import run_reporting_errors

    def broken() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_reporting_errors(broken)
