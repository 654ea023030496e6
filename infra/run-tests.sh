#!/usr/bin/env bash
# `make test`: lint, then every test — the training environment's (Spark, Horovod, MLflow, and the real Hadoop),
# then the Airflow environment's (DAG runs), then the DAG runs that share stores again with Airflow and MLflow on
# PostgreSQL. The Hadoop daemons and this checkout's PostgreSQL (infra/postgres.sh) are started here if they are not
# running, and stopped again at the end — on failure too — unless they were already up before (then they stay up).
# PYTEST_ARGS is passed to both pytest runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started_at=$(date +%s)
.venv/training/bin/ruff check .

started_hadoop=0
if ! infra/hadoop/hadoop.sh status > /dev/null 2>&1; then
    started_hadoop=1
fi
started_postgres=0
if ! infra/postgres.sh status > /dev/null 2>&1; then
    started_postgres=1
fi
stop_services() {
    if [[ "$started_hadoop" == 1 ]]; then
        infra/hadoop/hadoop.sh down || true
    fi
    if [[ "$started_postgres" == 1 ]]; then
        infra/postgres.sh down || true
    fi
}
trap stop_services EXIT
infra/hadoop/hadoop.sh up
infra/postgres.sh up
eval "$(infra/hadoop/hadoop.sh env)"
# The cluster's configuration goes only to the tests that use the cluster (tests/hadoop_cluster.py hands it on):
# with HADOOP_CONF_DIR set for everything, local-mode Spark sessions would read plain paths from HDFS.
export CLOUDBURST_TEST_HADOOP_CONF_DIR="$HADOOP_CONF_DIR"
unset HADOOP_CONF_DIR
export CLOUDBURST_REQUIRE_HADOOP=1  # a test that needs Hadoop fails, never skips, under make test
export CLOUDBURST_REQUIRE_DOCS=1  # likewise the docs environment (tests/test_docs.py: the strict site build)

read -r -a pytest_args <<< "${PYTEST_ARGS:-}"
# Two pytest-xdist workers per suite (TEST_WORKERS=0: one process). A whole-suite run left a third of both cores idle
# (waits on YARN, HDFS and the namespace hosts' links), so a second worker fills them; tests/conftest.py keeps a
# module on one worker and starts the cluster modules first.
workers=${TEST_WORKERS:-2}
parallel=()
if [[ "$workers" != 0 ]]; then
    parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
fi
# --durations: every log (CI's included) names the slowest tests, so the suite's time can be worked on; the JUnit
# reports in var/test-reports/ hold every test's time (setup and teardown included) for the same purpose.
reports=var/test-reports
mkdir -p "$reports"
.venv/training/bin/python -m pytest --ignore=tests/airflow "${parallel[@]}" --durations=25 --junitxml="$reports/training.xml" \
    "${pytest_args[@]}"
.venv/airflow/bin/python -m pytest tests/airflow "${parallel[@]}" --durations=25 --junitxml="$reports/airflow.xml" "${pytest_args[@]}"
# The same DAG runs on the deployment's stores: two at once sharing them, and the study's mapped tasks.
(
    eval "$(infra/postgres.sh env)"
    unset AIRFLOW__DATABASE__SQL_ALCHEMY_CONN MLFLOW_TRACKING_URI  # each test makes its own databases
    CLOUDBURST_TEST_STORE=postgres .venv/airflow/bin/python -m pytest "${parallel[@]}" --durations=5 \
        --junitxml="$reports/airflow-postgres.xml" "${pytest_args[@]}" \
        tests/airflow/test_concurrent_dag_runs.py \
        "tests/airflow/test_scaling_study_dag.py::test_a_tiny_study_runs_end_to_end_and_its_parent_run_holds_everything"
)
# How long the whole command took (lint and daemons included): `make record-results` copies it into docs/results.
printf '{"start": %s, "end": %s}\n' "$started_at" "$(date +%s)" > "$reports/make-test.json"
