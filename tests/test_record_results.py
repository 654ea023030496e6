"""infra/docs/record.py demos: each demo's newest finished runs — the plain demos' and the presets' (make demo-full,
make demo-kws-full) — go to their own result file, never to another demo's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import mlflow
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def record(monkeypatch):
    spec = importlib.util.spec_from_file_location("record", REPO_ROOT / "infra" / "docs" / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    published = {}
    monkeypatch.setattr(module, "publish",
                        lambda name, command, values, recorded=None: published.update({name: (command, values)})
                        or Path(f"{name}.json"))
    return module, published


def finished_run(client: mlflow.MlflowClient, experiment_id: str, name: str, accuracy: float,
                 status: str = "FINISHED") -> None:
    run = client.create_run(experiment_id, run_name=name)
    client.log_param(run.info.run_id, "epochs", "64")
    client.log_metric(run.info.run_id, "test_accuracy", accuracy)
    client.set_terminated(run.info.run_id, status)


def test_a_preset_demo_is_recorded_apart_from_the_plain_demo(tmp_path, record, monkeypatch):
    module, published = record
    monkeypatch.setattr(module, "REPO_ROOT", tmp_path)  # the summaries infra/demo.sh printed: var/demo-…-summary.txt
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "demo-kws_densenet_bilstm-full-summary.txt").write_text(f"run in {tmp_path}/var\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    kws = client.create_experiment("kws_densenet_bilstm", artifact_location=str(tmp_path / "artifacts"))
    finished_run(client, kws, "horovod-1x1-demo-horovod-1x1", 0.84)
    finished_run(client, kws, "horovod-1x2-demo-full-horovod-1x2", 0.96)
    finished_run(client, kws, "horovod-1x2-demo-full-horovod-1x2", 0.10, status="FAILED")  # not finished
    finished_run(client, kws, "horovod-1x2-demo-horovod-1x2-3f9a1c", 0.50)  # a DEMO_CONF variant: not a demo's

    module.record_demos(uri)
    assert set(published) == {"demo-kws_densenet_bilstm", "demo-kws_densenet_bilstm-full"}
    command, plain = published["demo-kws_densenet_bilstm"]
    assert command == "make demo-kws" and set(plain) == {"1x1"} and plain["1x1"]["test_accuracy"] == 0.84
    command, full = published["demo-kws_densenet_bilstm-full"]
    assert command == "make demo-kws-full" and set(full) == {"1x2", "summary"} and full["summary"] == "run in …/var"
    assert full["1x2"]["test_accuracy"] == 0.96 and full["1x2"]["epochs"] == 64


def test_a_figure_the_recorded_run_logged_is_copied_beside_its_figures(tmp_path, record, monkeypatch):
    module, published = record
    monkeypatch.setattr(module, "REPO_ROOT", tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    kws = client.create_experiment("kws_densenet_bilstm", artifact_location=str(tmp_path / "artifacts"))
    finished_run(client, kws, "horovod-1x2-demo-full-horovod-1x2", 0.90)  # an older run: no figure, none copied
    result = Path("demo-kws_densenet_bilstm-full.json")
    assert module.record_demos(uri) == [result] and not (tmp_path / "docs").exists()
    run = client.create_run(kws, run_name="horovod-1x2-demo-full-horovod-1x2")
    client.log_text(run.info.run_id, "not really a PNG", "keyword_threshold.png")
    client.set_terminated(run.info.run_id, "FINISHED")
    written = module.record_demos(uri)
    figure = tmp_path / "docs" / "img" / "demo-kws_densenet_bilstm-full-keyword-threshold.png"
    assert written == [result, figure] and figure.read_text() == "not really a PNG"
    assert published["demo-kws_densenet_bilstm-full"][1]["1x2"]["run_id"] == run.info.run_id


def test_every_preset_of_a_workload_has_a_demo_command_that_the_makefile_defines(record):
    from training import workload_registry as workloads

    module, _ = record
    makefile = (REPO_ROOT / "Makefile").read_text()
    for (workload, preset), command in module.DEMO_COMMANDS.items():
        assert f"\n{command.removeprefix('make ')}:" in makefile, command
        assert not preset or preset in workloads.definition(workload).presets


def test_a_demo_re_run_that_trained_nothing_keeps_the_summary_of_the_demo_that_did(tmp_path):
    import subprocess

    kept, new = tmp_path / "demo-summary.txt", tmp_path / "demo-summary.txt.tmp"

    def summary(wall: int, run: str) -> str:
        return f"test accuracy 98 %\nMLflow run        {run} in experiment kws\ndemo wall time    {wall} s\n"

    def keep(text: str) -> str:
        new.write_text(text)
        subprocess.run([REPO_ROOT / "infra" / "keep-summary.sh", new, kept], check=True, capture_output=True)
        assert not new.exists()
        return kept.read_text()

    assert keep(summary(2231, "abc")) == summary(2231, "abc")  # the first: kept
    assert keep(summary(43, "abc")) == summary(2231, "abc")  # a no-op re-run: the same run, the real wall time kept
    moved = summary(43, "abc").replace("experiment kws", "experiment kws (sqlite:////elsewhere/mlflow.db)")
    assert keep(moved) == summary(2231, "abc")  # the same run printed from another checkout: still the same run
    assert keep(summary(1900, "def")) == summary(1900, "def")  # retrained: replaced
    assert keep("the DAG run printed no run\n") == "the DAG run printed no run\n"  # nothing to compare: replaced


def test_a_recorded_summary_names_no_folder_of_this_machine_not_even_another_checkout_s(record):
    record, _ = record
    text = (f"\nlog {record.REPO_ROOT}/var/demo.log\n"
            "MLflow run 0a in experiment kws (sqlite:////work/wt-demo/var/mlflow/mlflow.db)\n")
    assert record.shown_summary(text) == ("log …/var/demo.log\n"
                                          "MLflow run 0a in experiment kws (sqlite:///…/var/mlflow/mlflow.db)")
