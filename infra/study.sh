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
# STUDY_CONF read strictly (one object, no key twice, bounded) and planned as the DAG's plan task will plan it, so a
# bad setting, a grid over budget or one Airflow cannot map fails here in one line, before anything starts.
# $1 = plan | shape (JSON and run_settings only) | cluster NODES HDFS_URI (plan with the cluster's defaults).
study_conf() {
    .venv/airflow/bin/python - "$@" <<'PY'
import json, sys
from training.settings import RunSpecError
from training.strict_json import JsonError
from training.study.plan import DEFAULT_RUN_SETTINGS, plan_study, run_settings_of, study_conf
mode, text, *cluster = sys.argv[1:]
try:
    conf = study_conf(text)
    run_settings_of(conf)
    if mode == "cluster":  # claim (b) by default: every worker host at 10gbit, 1gbit and 100mbit
        nodes, hdfs = cluster
        conf.setdefault("nodes", nodes)
        conf.setdefault("workers_per_node", "1")
        conf.setdefault("link_rates", "10gbit,1gbit,100mbit")
        conf.setdefault("n_push", "4")
        conf.setdefault("repetitions", 1)
        if conf.get("run_settings") is None:
            conf["run_settings"] = {"epochs": 2, "train_limit": 20000, "test_limit": 2000}
        conf["run_settings"].setdefault("spark_master", "yarn")
        conf["run_settings"].setdefault("data_root", f"{hdfs}/cloudburst-study")
    if mode != "shape":
        plan_study({"run_settings": DEFAULT_RUN_SETTINGS, **conf})
except (RunSpecError, JsonError) as error:
    sys.exit(f"[study] {error}")
print(json.dumps(conf))
PY
}
if [[ "${1:-}" == "--cluster" ]]; then
    # `make study-cluster`: the namespace cluster (up if it is not; its links re-shaped per run by the study's
    # link_rates), Spark's jars on its HDFS, its client settings; the study's data on its HDFS, Spark on YARN, and
    # by default claim (b): Horovod and Downpour on every worker host at 10gbit, 1gbit and 100mbit.
    nodes="${2:-2}"
    study_conf shape "$conf" > /dev/null || exit 2
    infra/cluster/netns.sh up "$nodes" "${LINK:-10gbit}"
    infra/cluster/netns.sh spark-archive
    eval "$(infra/cluster/netns.sh env)"
    conf="$(study_conf cluster "$conf" "$nodes" "$CLOUDBURST_HDFS_URI")" || exit 2
else
    conf="$(study_conf plan "$conf")" || exit 2
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
store=""  # the UIs must open the store this study wrote to
[[ "${CLOUDBURST_STORE:-sqlite}" == postgres ]] && store=" STORE=postgres"
echo "Look closer: make mlflow-ui$store → the study-<name> run (its nested runs, study.csv, figures, recommendation.md);"
echo "             make airflow-up$store → DAG scaling_study, Grid view (one box per mapped configuration)"
