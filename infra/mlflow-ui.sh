#!/usr/bin/env bash
# The MLflow UI on this checkout's tracking store, in the foreground (Ctrl-C stops it), the lean way:
# one worker, no job-execution processes.
#   infra/mlflow-ui.sh                 store: $MLFLOW_TRACKING_URI, default sqlite:///<repo>/var/mlflow/mlflow.db
#   CLOUDBURST_MLFLOW_PORT=5001 infra/mlflow-ui.sh
#   CLOUDBURST_STORE=postgres infra/mlflow-ui.sh   the store in this checkout's PostgreSQL (infra/postgres.sh)
# No --default-artifact-root: our experiments carry their own file:// artifact locations (var/mlflow/artifacts),
# and the server reads those paths directly, so run artifacts open in the UI. Anything uploaded *through* this
# server (experiments it creates itself, e.g. "Default") lands in the artifacts folder beside the database.
# It prints each experiment's Runs view: MLflow 3.17's UI opens an experiment in its GenAI view (Overview, Traces)
# whatever the experiment's kind tag says, unless the URL carries ?workflowType=machine_learning (or the browser
# last chose "Model training" on the sidebar's switch); those links carry it (training.tracking.ui_links).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
if [[ "${CLOUDBURST_STORE:-sqlite}" == postgres ]]; then  # STORE=postgres: the checkout's own PostgreSQL
    "$ROOT/infra/postgres.sh" up
    # shellcheck source=infra/airflow-env.sh
    source "$ROOT/infra/airflow-env.sh"
fi
MLFLOW="$ROOT/.venv/airflow/bin/mlflow"
URI="${MLFLOW_TRACKING_URI:-sqlite:///$ROOT/var/mlflow/mlflow.db}"
PORT="${CLOUDBURST_MLFLOW_PORT:-5000}"
HOST=127.0.0.1
ARTIFACTS="$ROOT/var/mlflow/artifacts"

case "$URI" in
    http://* | https://* | databricks*)
        echo "MLFLOW_TRACKING_URI=$URI is already a tracking server: open it in a browser instead." >&2
        exit 1 ;;
    sqlite:///*)
        db="${URI#sqlite:///}"
        mkdir -p "$(dirname "$db")"
        ARTIFACTS="$(cd "$(dirname "$db")" && pwd -P)/artifacts" ;;
esac
if [[ ! -x "$MLFLOW" ]]; then
    echo "$MLFLOW not found: run 'make setup' first." >&2
    exit 1
fi
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
    echo "Port $PORT on $HOST is taken; set CLOUDBURST_MLFLOW_PORT to a free port." >&2
    exit 1
fi

echo "MLflow UI on http://$HOST:$PORT  (store: $URI; Ctrl-C stops it)"
# Read-only, bounded; the UI starts without the links if the store cannot be read here.
if links="$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" timeout 60 "$ROOT/.venv/airflow/bin/python" -c \
        'import sys; from training.tracking import ui_links; print("\n".join(ui_links(sys.argv[1], sys.argv[2])))' \
        "$URI" "http://$HOST:$PORT" 2>/dev/null)" && [[ -n "$links" ]]; then
    echo "Each experiment's training runs (the Model training view; MLflow 3.17 opens the GenAI view otherwise):"
    sed 's/^/  /' <<<"$links"
fi
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
exec "$MLFLOW" server --backend-store-uri "$URI" --host "$HOST" --port "$PORT" --workers 1 \
    --artifacts-destination "$ARTIFACTS"
