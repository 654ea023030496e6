#!/usr/bin/env bash
# `make demo`: the mnist_elastic_cnn DAG on the embedded default (Spark local[*], ./var standing in for HDFS,
# MLflow and Airflow on SQLite), run with `airflow dags test` on the full MNIST, then a short summary per run.
# `make demo-kws` (infra/demo.sh kws_densenet_bilstm): the keyword-spotting DAG on a synthetic Speech Commands
# corpus; `make demo-sv` (infra/demo.sh speaker_verification): the speaker-verification DAG on one of 300 voices. Settings are the workload's defaults (training/workloads/<name>/, `cloudburst settings --workload …`);
# override them with DEMO_CONF='{"epochs": 3, "strategy": "downpour", ...}' and the configurations with
# DEMO_CONFIGS='1x2' (nodes x workers_per_node, space-separated; default: 1x1, the speedup baseline, then 1x2).
# DEMO_PRESET=full fills the settings of the workload's named preset first (`make demo-full`: MNIST for accuracy;
# `make demo-kws-full`: keyword spotting on 1,000 speakers).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
mkdir -p var
# shellcheck source=infra/airflow-env.sh
source infra/airflow-env.sh

dag_id="${1:-mnist_elastic_cnn}"
configs="${DEMO_CONFIGS:-1x1 1x2}"
log="var/demo-${dag_id}${DEMO_PRESET:+-$DEMO_PRESET}.log"  # a preset's hour-long log does not replace the demo's
# `make demo-cluster` (DEMO_CLUSTER=1): the same DAG with its data on the real HDFS and Spark on YARN
# (infra/hadoop/hadoop.sh, brought up by the make target), 1x2 unless DEMO_CONFIGS says otherwise.
export DEMO_CLUSTER_CONF="{}"
if [[ "${DEMO_CLUSTER:-0}" == 1 ]]; then
    eval "$(infra/hadoop/hadoop.sh env)"
    configs="${DEMO_CONFIGS:-1x2}"
    log="var/demo-cluster-${dag_id}.log"
    DEMO_CLUSTER_CONF="{\"data_root\": \"$CLOUDBURST_HDFS_URI/cloudburst\", \"spark_master\": \"yarn\"}"
fi

# The run specification of one configuration as DAG conf (JSON) and as job flags; checked before anything runs,
# so a bad DEMO_CONF or DEMO_CONFIGS fails here in one line. Run names carry strategy and shape (demo-horovod-1x2)
# and, with DEMO_CONF, a digest of its other settings (demo-horovod-1x2-3f9a1c).
spec_of() {  # $1 = config, $2 = json | args
    .venv/airflow/bin/python - "$dag_id" "$1" "${DEMO_CONF:-}" "$2" "${DEMO_PRESET:-}" <<'PY'
import hashlib, json, os, re, sys
from training import workload_registry as workloads
from training.config import RunSpec, json_values, preset_values
from training.settings import RunSpecError, shown
from training.strict_json import JsonError, loads_object
dag_id, config, user, form, preset = sys.argv[1:]
try:
    workloads.definition(dag_id)
    if not re.fullmatch(r"[1-9][0-9]{0,3}x[1-9][0-9]{0,3}", config):
        raise RunSpecError(f"DEMO_CONFIGS entry {shown(config)}: expected nodes x workers_per_node, e.g. 1x2")
    overrides = loads_object(user or "{}", "DEMO_CONF")  # strict: no key twice, bounded size and depth
    typed = json_values(overrides)  # JSON types as declared ("3" is no integer), before a name is made of them
    nodes, workers_per_node = (int(part) for part in config.split("x"))
    strategy = typed.get("strategy") or RunSpec(workload=dag_id).strategy
    cluster = loads_object(os.environ.get("DEMO_CLUSTER_CONF") or "{}", "DEMO_CLUSTER_CONF")
    preset_settings = preset_values(dag_id, preset) if preset else {}
    # Other DEMO_CONF settings add a digest of themselves to the name: a run directory holds one spec, so a
    # variant never collides with the plain demo's run (refused: "already holds a run with other settings"),
    # and the same DEMO_CONF again names the same run (a no-op).
    varied = {name: value for name, value in overrides.items() if name not in ("run_name", "strategy")}
    digest = "-" + hashlib.sha1(json.dumps(varied, sort_keys=True).encode()).hexdigest()[:6] if varied else ""
    values = {"nodes": nodes, "workers_per_node": workers_per_node,
              "run_name": f"demo-{preset + '-' if preset else ''}{strategy}-{config}{digest}",
              **preset_settings, **cluster, **typed, "workload": dag_id}
    spec = RunSpec.from_json(values).validate()
except (RunSpecError, JsonError) as error:
    sys.exit(f"[demo] {error}")
if form == "json":
    print(json.dumps({name: value for name, value in values.items() if name != "workload"}))
else:
    print(" ".join(spec.to_args()))
PY
}

for config in $configs; do spec_of "$config" json > /dev/null; done  # every configuration valid before any runs

infra/airflow-ready.sh demo  # the metadata database, once and under a lock
expected="a few minutes"
[[ -n "${DEMO_PRESET:-}" ]] && expected="30-90 min"  # a full preset: MNIST's about 30 min, keyword spotting's about an hour
echo "[demo] $dag_id, configurations: $configs; full log: $log ($expected per configuration on 2 cores)"
started=$(date +%s)
: > "$log"
for config in $configs; do
    conf=$(spec_of "$config" json)
    echo "[demo] $(date +%H:%M:%S) airflow dags test $dag_id -c '$conf'"
    if ! .venv/airflow/bin/airflow dags test "$dag_id" -c "$conf" >> "$log" 2>&1; then
        grep -E "ERROR|Error|error:" "$log" | tail -20 || true
        echo "[demo] the DAG run for $config failed; see $log" >&2
        exit 1
    fi
done
elapsed=$(( $(date +%s) - started ))

evaluate_module=$(.venv/airflow/bin/python -c \
    "from training import workload_registry as workloads; print(workloads.definition('$dag_id').job_module('evaluate'))")
# The plain demo's summary is also kept in var/demo-<dag>-summary.txt: `make record-results` copies it into
# docs/results beside that demo's runs. A variant (DEMO_CONF, DEMO_CONFIGS, the cluster) keeps its own.
# A preset's own demo (make demo-full, make demo-kws-full) keeps var/demo-<dag>-<preset>-summary.txt.
summary=var/demo-$dag_id-summary.txt
if [[ -n "${DEMO_CONF:-}" || "${DEMO_CLUSTER:-0}" == 1 ]]; then
    summary=var/demo-$dag_id-variant-summary.txt
elif [[ -n "${DEMO_PRESET:-}" ]]; then
    summary=var/demo-$dag_id-$DEMO_PRESET-summary.txt
elif [[ -n "${DEMO_CONFIGS:-}" ]]; then
    summary=var/demo-$dag_id-variant-summary.txt
fi
{
echo
echo "================ Cloudburst demo: $dag_id ================"
for config in $configs; do
    # The evaluate step is idempotent: run again with the same settings it only prints the run's summary.
    read -r -a spec_args <<< "$(spec_of "$config" args)"
    .venv/training/bin/python -m "$evaluate_module" "${spec_args[@]}" 2>/dev/null
    echo
done
if [[ "${DEMO_CLUSTER:-0}" == 1 ]]; then
    echo "data on HDFS      $CLOUDBURST_HDFS_URI/cloudburst  (browse: http://127.0.0.1:9870/explorer.html#/cloudburst)"
    echo "YARN applications (http://${CLOUDBURST_YARN_WEB}/cluster):"
    .venv/training/bin/python - "$CLOUDBURST_YARN_WEB" "$((started * 1000))" <<'PY'
import json, sys, urllib.request
address, since = sys.argv[1:]
with urllib.request.urlopen(f"http://{address}/ws/v1/cluster/apps?startedTimeBegin={since}", timeout=10) as reply:
    apps = (json.load(reply).get("apps") or {}).get("app") or []
for app in sorted(apps, key=lambda app: app["startedTime"]):
    print(f"  {app['id']}  {app['name']:<22} {app['finalStatus']:<10} {app['elapsedTime'] / 1000:6.1f} s")
PY
fi
steps=$(.venv/airflow/bin/python -c "from training import workload_registry as workloads; print(' → '.join(workloads.definition('$dag_id').steps))")
echo "demo wall time    ${elapsed} s for: $configs (each: validate → $steps)"
echo
store=""  # the UIs must open the store this demo wrote to
[[ "${CLOUDBURST_STORE:-sqlite}" == postgres ]] && store=" STORE=postgres"
echo "Look closer:"
echo "  make mlflow-ui$store    → http://127.0.0.1:5000, experiment $dag_id (compare runs by the config tag)"
echo "  make airflow-up$store   → http://127.0.0.1:8080, DAG $dag_id (the command prints the login)"
echo "  re-running make demo is a no-op per configuration; make clean starts over"
} | tee "$summary.tmp"
infra/keep-summary.sh "$summary.tmp" "$summary"
