#!/usr/bin/env bash
# `make demo`: the mnist_elastic_cnn DAG on the embedded default (Spark local[*], ./var standing in for HDFS,
# MLflow and Airflow on SQLite), run with `airflow dags test` on the full MNIST, then a short summary.
# Override the demo's settings with DEMO_CONF='{"epochs": 3, ...}' (merged over the defaults below).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
mkdir -p var
# shellcheck source=infra/airflow-env.sh
source infra/airflow-env.sh

# Full MNIST with one elastic copy per image (120,000 training images per epoch), trained twice: first one worker
# (the speedup baseline), then two workers on this 2-core machine. DEMO_CONFIGS='1x2' skips the baseline.
base_conf='{"epochs": 5, "batch_size_per_worker": 128, "augment_copies": 1, "learning_rate": 0.001}'
configs="${DEMO_CONFIGS:-1x1 1x2}"

merged_conf() {  # base settings, then the configuration's cluster shape, then the user's DEMO_CONF
    .venv/airflow/bin/python - "$base_conf" "$1" "${DEMO_CONF:-}" <<'PY'
import json, sys
base, config, user = sys.argv[1:]
nodes, workers_per_node = (int(part) for part in config.split("x"))
shape = {"nodes": nodes, "workers_per_node": workers_per_node, "run_name": f"demo-{config}"}
print(json.dumps({**json.loads(base), **shape, **json.loads(user or "{}")}))
PY
}

.venv/airflow/bin/airflow db migrate > var/airflow-migrate.log 2>&1 || { cat var/airflow-migrate.log; exit 1; }
echo "[demo] full log: var/demo.log (about 4 minutes per configuration on 2 cores)"
started=$(date +%s)
: > var/demo.log
for config in $configs; do
    conf=$(merged_conf "$config")
    echo "[demo] $(date +%H:%M:%S) airflow dags test mnist_elastic_cnn -c '$conf'"
    if ! .venv/airflow/bin/airflow dags test mnist_elastic_cnn -c "$conf" >> var/demo.log 2>&1; then
        grep -E "ERROR|Error|error:" var/demo.log | tail -20
        echo "[demo] the DAG run for $config failed; see var/demo.log" >&2
        exit 1
    fi
    grep -oE "\[horovod\] epoch [^[]*" var/demo.log | tail -n "$(.venv/airflow/bin/python -c 'import json,sys; print(json.loads(sys.argv[1])["epochs"])' "$conf")" | sed 's/^/    /'
done
elapsed=$(( $(date +%s) - started ))

# The evaluate step is idempotent: run again with the same settings it only prints the run's summary.
spec_args=$(.venv/airflow/bin/python - "$conf" <<'PY'
import json, sys
from training.config import RunSpec
print(" ".join(RunSpec.from_mapping(json.loads(sys.argv[1])).to_args()))
PY
)
echo
echo "================ Cloudburst demo: mnist_elastic_cnn ================"
# shellcheck disable=SC2086
.venv/training/bin/python -m training.jobs.evaluate $spec_args 2>/dev/null
echo "demo wall time    ${elapsed} s for: $configs (each: ingest → augment → shard → train → evaluate)"
echo
echo "Look closer:"
echo "  make mlflow-ui    → http://127.0.0.1:5000, experiment mnist_elastic_cnn (compare runs by the config tag)"
echo "  make airflow-up   → http://127.0.0.1:8080, DAG mnist_elastic_cnn (the command prints the login)"
echo "  re-running make demo is a no-op per configuration; make clean starts over"
