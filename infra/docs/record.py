"""Record measured results as files the docs are rendered from (docs/results/<name>.json).

Every figure in README.md and docs/ comes from one of these files (infra/docs/render.py fills the marked places and
fails on a typed figure). A file says when, on which commit and on which machine its values were measured, and by
which command. Three sources (the benches write their own files through bench/results.py):

    record.py tests  [--reports var/test-reports]   `make test`'s JUnit reports → make-test.json
    record.py demos  [--tracking-uri URI]            the newest `make demo*` runs → demo-<workload>[-<preset>].json
    record.py study  [--tracking-uri URI] --command C the newest scaling study's table and advice → study.json

Run with the training environment (MLflow). Nothing here measures: it copies what a run recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))
from results import publish, table  # noqa: E402  (bench/results.py: the one writer of result files)

# The demos recorded: (workload, preset) → the make command that runs them (infra/demo.sh). Their runs are named
# demo-[<preset>-]horovod-<configuration>, for the configurations below.
DEMO_CONFIGURATIONS = ("1x1", "1x2")
DEMO_COMMANDS = {("mnist_elastic_cnn", ""): "make demo", ("kws_densenet_bilstm", ""): "make demo-kws",
                 ("speaker_verification", ""): "make demo-sv", ("mnist_elastic_cnn", "full"): "make demo-full",
                 ("kws_densenet_bilstm", "full"): "make demo-kws-full"}
# Figures a demo's run logs that the docs show: (workload, preset) → (configuration, artifact). Each is copied to
# docs/img/<result name>-<artifact>, beside the figures it was recorded with.
DEMO_FIGURES = {("kws_densenet_bilstm", "full"): ("1x2", "keyword_threshold.png")}
# Per-class, per-family and per-keyword metrics stay in MLflow; the docs quote the run's headline figures.
DETAIL_METRIC = re.compile(r"_(class|family|keyword)_|false_accepts_|^val_|^train_|^epoch_|_ci_|^act_dcf|_threshold_|"
                           r"^cllr_|^min_dcf_p0[15]_|_enroll[0-9]")
TEST_SUITES = {"training": "training.xml", "airflow": "airflow.xml", "postgres": "airflow-postgres.xml"}


def record_tests(reports: Path) -> Path:
    """make-test.json from the JUnit reports of one `make test` (infra/run-tests.sh writes them)."""
    values: dict[str, Any] = {}
    first_start = last_end = None
    for suite, file_name in TEST_SUITES.items():
        path = reports / file_name
        if not path.exists():
            raise SystemExit(f"no {path}: run `make test` first")
        root = ET.parse(path).getroot()
        element = root if root.tag == "testsuite" else root.find("testsuite")
        if element is None:
            raise SystemExit(f"{path} holds no test suite")
        attributes = element.attrib
        failed = int(attributes["failures"]) + int(attributes["errors"])
        if failed:
            raise SystemExit(f"{path}: {failed} tests failed; only a green run is recorded")
        start = datetime.fromisoformat(attributes["timestamp"])
        seconds = float(attributes["time"])
        first_start = min(first_start or start, start)
        end = start.timestamp() + seconds
        last_end = max(last_end or end, end)
        values[suite] = {"tests": int(attributes["tests"]), "skipped": int(attributes["skipped"]),
                         "minutes": round(seconds / 60, 1)}
    timing = reports / "make-test.json"  # infra/run-tests.sh: the whole command, lint and daemons included
    if timing.exists():
        whole = json.loads(timing.read_text())
        values["total_minutes"] = round((whole["end"] - whole["start"]) / 60, 1)
    else:
        values["total_minutes"] = round((last_end - first_start.timestamp()) / 60, 1)
    values["tests"] = sum(values[suite]["tests"] for suite in TEST_SUITES)
    return publish("make-test", "make test", values, recorded=first_start.date().isoformat())


def _store(tracking_uri: str) -> Any:
    """A client for an existing store: a SQLite file that is not there is refused, not created empty."""
    from mlflow import MlflowClient

    if tracking_uri.startswith("sqlite:///") and not Path(tracking_uri.removeprefix("sqlite:///")).exists():
        raise SystemExit(f"no MLflow store at {tracking_uri}: run the demos (or the study) first, or pass "
                         "--tracking-uri")
    return MlflowClient(tracking_uri)


def record_demos(tracking_uri: str) -> list[Path]:
    """demo-<workload>[-<preset>].json: the newest finished runs (1x1 and 1x2) of each demo in MLflow."""
    client = _store(tracking_uri)
    written = []
    for (workload, preset), command in DEMO_COMMANDS.items():
        experiment = client.get_experiment_by_name(workload)
        values, newest = _demo_runs(client, experiment, preset) if experiment is not None else ({}, 0)
        name = f"demo-{workload}" + (f"-{preset}" if preset else "")
        summary = REPO_ROOT / "var" / f"{name}-summary.txt"  # what infra/demo.sh printed last
        if values and summary.exists():
            # The checkout's own folder is this machine's business: a reader's differs.
            values["summary"] = shown_summary(summary.read_text())
        if values:
            recorded = datetime.fromtimestamp(newest / 1000, UTC).date().isoformat()
            written.append(publish(name, command, values, recorded=recorded))
            written += _copy_figure(client, name, values, DEMO_FIGURES.get((workload, preset)))
    return written


def shown_summary(text: str) -> str:
    """A demo's summary as the docs show it: the checkout's own folder is this machine's business (a reader's
    differs), also where the demo ran in another checkout of the same var/ (its MLflow store's path)."""
    text = text.strip("\n").replace(str(REPO_ROOT), "…")
    return re.sub(r"(sqlite:///)/\S*?(/var/mlflow/)", r"\1…\2", text)


def _copy_figure(client: Any, name: str, values: dict[str, Any], figure: tuple[str, str] | None) -> list[Path]:
    """docs/img/<name>-<artifact>: a figure the recorded run logged (none if it logged none, e.g. an older run)."""
    if figure is None or figure[0] not in values:
        return []
    configuration, artifact = figure
    run_id = values[configuration]["run_id"]
    if artifact not in {item.path for item in client.list_artifacts(run_id)}:
        return []
    with tempfile.TemporaryDirectory() as scratch:
        target = REPO_ROOT / "docs" / "img" / f"{name}-{artifact.replace('_', '-')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(client.download_artifacts(run_id, artifact, scratch), target)
    return [target]


def _demo_runs(client: Any, experiment: Any, preset: str) -> tuple[dict[str, Any], int]:
    """({configuration[-model]: headline metrics}, newest end time in ms) of one demo's newest finished runs."""
    values: dict[str, Any] = {}
    newest = 0
    for configuration in DEMO_CONFIGURATIONS:
        for role in ("", "system-"):
            demo_name = f"demo-{preset + '-' if preset else ''}horovod-{configuration}"
            runs = client.search_runs([experiment.experiment_id],
                                      f"attributes.run_name = '{role}horovod-{configuration}-{demo_name}' "
                                      "and attributes.status = 'FINISHED'", order_by=["attributes.start_time DESC"],
                                      max_results=20)
            for run in runs:  # newest first; speaker verification trains one run per embedding model
                params = run.data.params
                model = params.get("embedding_model") if not role else None
                key = f"{role}{configuration}" + (f"-{model}" if model else "")
                if key in values:
                    continue
                metrics = {key: value for key, value in run.data.metrics.items() if not DETAIL_METRIC.search(key)}
                metrics["epochs"] = int(params.get("epochs", 0))
                metrics["run_id"] = run.info.run_id
                values[key] = dict(sorted(metrics.items()))
                newest = max(newest, run.info.end_time or run.info.start_time)
    return values, newest


# The study's table (training.study.report.Row, as study.csv holds it) as the docs show it: column, key, format.
STUDY_COLUMNS = (("configuration", "label", "text"), ("workers", "total_workers", "int"),
                 ("samples/s", "samples_per_second", "int"), ("speedup", "speedup", "x"),
                 ("efficiency", "efficiency", "pct1"), ("of its ceiling", "ceiling_ratio", "pct1"),
                 ("time to target", "time_to_target_seconds", "s"), ("test accuracy", "test_accuracy", "pct"))


def record_study(tracking_uri: str, command: str) -> list[Path]:
    """study.json: the newest finished scaling study's table (study.csv), recommendation and duration."""
    import csv
    import io

    import mlflow

    from training.study import report

    client = _store(tracking_uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    studies = client.search_runs(experiments, "tags.`cloudburst.study_role` = 'study' and attributes.status = "
                                 "'FINISHED'", order_by=["attributes.start_time DESC"], max_results=1)
    if not studies:
        return []
    study = studies[0]
    text = mlflow.artifacts.load_text(f"{study.info.artifact_uri}/study.csv")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        cells = {}
        for _, key, form in STUDY_COLUMNS:
            value = row.get(key, "")
            cells[key] = value if form == "text" else (float(value) if value not in ("", "None", "nan") else None)
        rows.append(cells)
    values = {"study": study.info.run_name, "workload": study.data.tags.get("workload", ""),
              "recommendation": study.data.tags.get(report.RECOMMENDATION_TAG, ""),
              "study_minutes": study.data.metrics.get("study_minutes"),
              "ceiling_check": study.data.tags.get("cloudburst.ceiling_check", "")}
    recorded = datetime.fromtimestamp(study.info.start_time / 1000, UTC).date().isoformat()
    tables = {"rows": table(list(STUDY_COLUMNS), rows)}
    return [publish("study", command, values, tables, recorded=recorded)]


def _record(args: argparse.Namespace) -> list[Path]:
    if args.source == "tests":
        return [record_tests(args.reports)]
    if args.source == "demos":
        return record_demos(args.tracking_uri)
    return record_study(args.tracking_uri, args.run_command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="source", required=True)
    tests = commands.add_parser("tests", help="make-test.json from `make test`'s JUnit reports")
    tests.add_argument("--reports", type=Path, default=REPO_ROOT / "var" / "test-reports")
    demos = commands.add_parser("demos", help="demo-<workload>.json from the newest demo runs in MLflow")
    demos.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI",
                                                                f"sqlite:///{REPO_ROOT}/var/mlflow/mlflow.db"))
    study = commands.add_parser("study", help="study.json from the newest scaling study in MLflow")
    study.add_argument("--tracking-uri", default=demos.get_default("tracking_uri"))
    study.add_argument("--command", dest="run_command", required=True,
                       help="how the study was run, e.g. make study STUDY_CONF='…'")
    args = parser.parse_args(argv)
    from mlflow.exceptions import MlflowException

    try:
        written = _record(args)
    except (OSError, ValueError, KeyError, ET.ParseError, MlflowException) as error:  # unreadable, refused, missing
        raise SystemExit(f"record.py: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}") from None
    if not written:
        print(f"record.py: nothing recorded: no finished {args.source} run in that store", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
