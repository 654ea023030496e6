#!/usr/bin/env bash
# `make study`: the scaling_study DAG with its default grid (plugins/cloudburst_study.py, training/study/plan.py)
# on the embedded default (Spark local[*], ./var, MLflow and Airflow on SQLite) through `airflow dags test`, then
# the study's table and recommendation (`cloudburst advise --study latest`). Override the grid with
# STUDY_CONF='{"strategies": "horovod", "workers_per_node": "1,2", "run_settings": {"epochs": 2}}'; the plan task
# refuses a grid whose estimate exceeds budget_minutes (default 45) before anything runs.
# `infra/study.sh --cluster [NODES]` (make study-cluster): the same on the namespace cluster (root), see below.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
# shellcheck source=infra/airflow-env.sh
source infra/airflow-env.sh

conf="${STUDY_CONF:-{\}}"
log="var/study.log"
if ! .venv/airflow/bin/python -c 'import json, sys; value = json.loads(sys.argv[1]); assert isinstance(value, dict)' \
        "$conf" 2>/dev/null; then
    echo "[study] STUDY_CONF must be a JSON object, e.g. '{\"strategies\": \"horovod\"}'" >&2
    exit 2
fi
if [[ "${1:-}" == "--cluster" ]]; then
    # `make study-cluster`: the namespace cluster (up if it is not; its links re-shaped per run by the study's
    # link_rates), Spark's jars on its HDFS, its client settings; the study's data on its HDFS, Spark on YARN, and
    # by default claim (b): Horovod and Downpour on every worker host at 10gbit, 1gbit and 100mbit.
    nodes="${2:-2}"
    infra/cluster/netns.sh up "$nodes" "${LINK:-10gbit}"
    infra/cluster/netns.sh spark-archive
    eval "$(infra/cluster/netns.sh env)"
    conf="$(.venv/airflow/bin/python - "$conf" "$nodes" "$CLOUDBURST_HDFS_URI" <<'PY'
import json, sys
conf, nodes, hdfs = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
conf.setdefault("nodes", nodes)
conf.setdefault("workers_per_node", "1")
conf.setdefault("link_rates", "10gbit,1gbit,100mbit")
conf.setdefault("n_push", "4")
conf.setdefault("repetitions", 1)
settings = conf.setdefault("run_settings", {"epochs": 2, "train_limit": 20000, "test_limit": 2000})
settings.setdefault("spark_master", "yarn")
settings.setdefault("data_root", f"{hdfs}/cloudburst-study")
print(json.dumps(conf))
PY
)"
fi
infra/airflow-ready.sh study  # the metadata database, once and under a lock; the study's pool
echo "[study] $(date +%H:%M:%S) airflow dags test scaling_study -c '$conf'  (full log: $log)"
started=$(date +%s)
: > "$log"
# Progress: the plan's estimate and each task as it starts, read from the log as it grows (tail ends with us).
tail -n 0 --pid=$$ -F "$log" 2>/dev/null | while IFS= read -r line; do
    case "$line" in
        *"runs, estimated"*) echo "[study] $(date +%H:%M:%S) ${line%%;*}" ;;
        *"[DAG TEST] starting"*) what="${line#*starting }"; echo "[study] $(date +%H:%M:%S) ${what%% \[*}" ;;
    esac
done &
status=0
.venv/airflow/bin/airflow dags test scaling_study -c "$conf" >> "$log" 2>&1 || status=$?
sleep 1
if [[ $status -ne 0 ]] || grep -q "task_id=report.*state=failed\|Task failed\|RunSpecError\|StudyError" "$log"; then
    # The reason in one line (the plan's refusal, the report's verdict), else the log's last errors.
    # (|| true: with no such line grep fails, and under pipefail that would end the script before the errors print)
    reason=$(grep -E "^[A-Za-z_.]*(RunSpecError|StudyError): " "$log" | tail -1 | sed -E 's/^[A-Za-z_.]*: //' || true)
    if [[ -n "$reason" ]]; then echo "[study] $reason" >&2; else grep -E "ERROR" "$log" | tail -10 >&2 || true; fi
    echo "[study] the study failed; see $log" >&2
    exit 1
fi
echo
echo "================ Cloudburst scaling study ($(( $(date +%s) - started )) s) ================"
.venv/training/bin/python -m training.cli advise --study latest
echo
echo "Look closer: make mlflow-ui → the study-<name> run (its nested runs, study.csv, figures, recommendation.md);"
echo "             make airflow-up → DAG scaling_study, Grid view (one box per mapped configuration)"
