#!/usr/bin/env bash
# Make the embedded Airflow's metadata database ready for `airflow dags test`, once and under a lock: migrate,
# serialise the DAGs, create the scaling study's pool. Used by infra/demo.sh and infra/study.sh; expects
# infra/airflow-env.sh sourced. Two runs started at once on a fresh var/ would both create the tables, and two
# `airflow dags test` writing the DAGs' assets for the first time collide on them (UNIQUE constraint failed:
# asset.name) — serialising the DAGs first is what Airflow's dag-processor does. $1: the caller, for messages.
set -euo pipefail
caller="${1:-airflow}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
mkdir -p var/airflow
if [[ "${CLOUDBURST_STORE:-sqlite}" == postgres ]]; then
    infra/postgres.sh up
fi
if ! ( flock -w 600 9 || { echo "[$caller] var/airflow/setup.lock held for 10 min by another run" >&2; exit 1; }
       .venv/airflow/bin/airflow db migrate && .venv/airflow/bin/airflow dags reserialize &&
       .venv/airflow/bin/python -c "from cloudburst_study import ensure_study_pool; ensure_study_pool()"
     ) > var/airflow-migrate.log 2>&1 9> var/airflow/setup.lock; then
    cat var/airflow-migrate.log
    exit 1
fi
