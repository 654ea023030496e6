"""A user's own workload from outside the tree (examples/csv_classifier/): built and installed with pip, it is found
through its entry point alone (no $CLOUDBURST_WORKLOADS) and runs every `cloudburst` step a user types, under every
strategy; a bad CSV is one line and publishes nothing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_workload import EXAMPLE, install_example, user_environment

STEP_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return install_example(tmp_path_factory.mktemp("csv-classifier"))


def cloudburst(site: Path, *arguments: str) -> subprocess.CompletedProcess:
    """`cloudburst …` (the console script's main) in the user's environment."""
    return subprocess.run([sys.executable, "-m", "training.cli", *arguments], env=user_environment(site),
                          capture_output=True, text=True, timeout=STEP_TIMEOUT_S)


def test_the_installed_example_is_registered_by_its_entry_point(site):
    listed = cloudburst(site, "settings", "--workload", "csv_classifier")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "--label-column" in listed.stdout and "--hidden-units" in listed.stdout


@pytest.mark.timeout(900)
def test_the_installed_example_runs_every_step_under_every_strategy(site, tmp_path):
    import mlflow

    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = ("--workload", "csv_classifier", "--data-root", str(tmp_path / "data"), "--tracking-uri", tracking_uri,
              "--epochs", "1")
    for step in ("ingest", "shard"):
        done = cloudburst(site, step, *common)
        assert done.returncode == 0, f"{step}:\n{done.stderr[-3000:]}"
    for strategy in ("horovod", "downpour", "averaging"):
        for step in ("train", "evaluate"):
            done = cloudburst(site, step, *common, "--strategy", strategy, "--run-name", f"wine-{strategy}")
            assert done.returncode == 0, f"{strategy} {step}:\n{done.stderr[-3000:]}"

    client = mlflow.MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("csv_classifier").experiment_id])
    assert sorted(run.data.params["strategy"] for run in runs) == ["averaging", "downpour", "horovod"]
    for run in runs:
        assert run.data.params["workload"] == "csv_classifier" and run.data.params["label_column"] == "class"
        # 36 test wines; the largest cultivar is 40 % of them, and one epoch already gets well past that
        assert run.data.metrics["test_accuracy"] > 0.5, (run.data.params["strategy"], run.data.metrics)
        assert {"test_accuracy_class_class_0", "val_accuracy", "wall_seconds"} <= set(run.data.metrics)


HEADER = "alcohol,hue,class\n"
GOOD_ROWS = "".join(f"{12 + row / 10},{1 + row / 100},{'ab'[row % 2]}\n" for row in range(12))


@pytest.mark.parametrize(("content", "label_column", "expected"), [
    (GOOD_ROWS, "cultivar", ": no label column 'cultivar' (the header has 'alcohol', "
     "'hue', 'class'); set label_column to the column that holds the classes"),
    (GOOD_ROWS + "12.1,dark,a\n", "class", ", line 14, column 'hue': 'dark' is not a number"),
    (GOOD_ROWS + "12.1,nan,a\n", "class", ", line 14, column 'hue': 'nan' is not a finite float32"),
    (GOOD_ROWS + "12.1,a\n", "class", ", line 14: 2 fields, the header has 3"),
    (GOOD_ROWS + "12.1,0.9,c\n12.2,0.8,c\n", "class", ": class 'c' has 2 row(s); every class needs at least 5"),
    (None, "class", ": a FIFO, not a regular file; only regular files are read"),
    (b"\xff\xfe" + b"alcohol", "class", ": not UTF-8 text (byte 0); save the CSV as UTF-8"),
], ids=["missing-label-column", "non-numeric", "not-finite", "ragged-row", "too-few-per-class", "fifo", "not-utf8"])
def test_a_bad_csv_is_one_line_and_publishes_nothing(site, tmp_path, content, label_column, expected):
    path = tmp_path / "table.csv"
    if content is None:
        os.mkfifo(path)  # opened blocking, it would hang ingest until a writer came
    else:
        path.write_bytes(content if isinstance(content, bytes) else (HEADER + content).encode())
    data_root = tmp_path / "data"
    done = cloudburst(site, "ingest", "--workload", "csv_classifier", "--data-root", str(data_root),
                      "--data-source", str(path), "--label-column", label_column)
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(errors) == 1 and f"{path}{expected}" in errors[0], done.stderr[-3000:]
    assert not list(data_root.rglob("manifest.json"))


def test_the_sample_splits_every_row_once_by_class_and_seed(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from cloudburst_csv_classifier.table import split_rows

    labels = np.repeat(np.arange(3, dtype=np.int8), [59, 71, 48])
    splits = split_rows(labels, seed=0)
    assert sorted(np.concatenate(list(splits.values())).tolist()) == list(range(len(labels)))
    assert {split: len(rows) for split, rows in splits.items()} == {"train": 106, "validation": 36, "test": 36}
    assert all(np.array_equal(rows, split_rows(labels, seed=0)[split]) for split, rows in splits.items())
    assert not np.array_equal(splits["test"], split_rows(labels, seed=1)["test"])
    for rows in splits.values():  # each class in each split
        assert set(labels[rows].tolist()) == {0, 1, 2}


def test_the_shipped_sample_is_what_its_script_writes():
    spec = importlib.util.spec_from_file_location("make_sample_csv", EXAMPLE / "make_sample_csv.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.sample_csv() == script.SAMPLE.read_text()
