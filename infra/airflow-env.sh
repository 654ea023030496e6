# shellcheck shell=bash
# Airflow settings for this checkout's embedded default (SQLite, LocalExecutor, Spark local[*], ./var for state).
# Meant to be sourced, from any directory:   source infra/airflow-env.sh
# It only exports variables; `airflow db migrate` is run by infra/airflow-services.sh, not here.
# CLOUDBURST_STORE=postgres (make … STORE=postgres): Airflow's metadata and MLflow's store in this checkout's own
# PostgreSQL (infra/postgres.sh, started by the scripts that need it) instead of SQLite files under var/.
# Overrides: CLOUDBURST_AIRFLOW_PORT (default 8080), CLOUDBURST_AIRFLOW_HOST (default 127.0.0.1),
# CLOUDBURST_WEBHDFS_PORT (the NameNode's HTTP port, default 9870), and any AIRFLOW_CONN_SPARK_DEFAULT /
# AIRFLOW_CONN_WEBHDFS_DEFAULT / MLFLOW_TRACKING_URI already in the environment.

_cloudburst_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

export AIRFLOW_HOME="$_cloudburst_root/var/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$_cloudburst_root/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$_cloudburst_root/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__EXECUTOR=LocalExecutor
export AIRFLOW__CORE__PARALLELISM=4
export AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=120

# The simple auth manager's real login (user admin, generated password). Never "all admins" here.
unset AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS

export AIRFLOW__API__PORT="${CLOUDBURST_AIRFLOW_PORT:-8080}"
export AIRFLOW__API__HOST="${CLOUDBURST_AIRFLOW_HOST:-127.0.0.1}"
# Task processes reach the api-server's execution API here; Airflow's own default assumes port 8080.
_cloudburst_api_host="$AIRFLOW__API__HOST"
if [[ "$_cloudburst_api_host" == "0.0.0.0" || "$_cloudburst_api_host" == "::" ]]; then
    _cloudburst_api_host=127.0.0.1
fi
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://$_cloudburst_api_host:$AIRFLOW__API__PORT/execution/"

if [[ -z "${AIRFLOW_CONN_SPARK_DEFAULT:-}" ]]; then
    export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type":"spark","host":"local[*]"}'
fi
# The NameNode Airflow's HDFS sensors ask (WebHDFS, its HTTP port): plugins/cloudburst_hdfs.py.
if [[ -z "${AIRFLOW_CONN_WEBHDFS_DEFAULT:-}" ]]; then
    export AIRFLOW_CONN_WEBHDFS_DEFAULT="{\"conn_type\":\"webhdfs\",\"host\":\"127.0.0.1\",\"port\":${CLOUDBURST_WEBHDFS_PORT:-9870}}"
fi
case "${CLOUDBURST_STORE:-sqlite}" in
    sqlite) ;;
    postgres)
        # Only the lines' values: an Airflow or MLflow URI already in the environment wins, as for SQLite.
        while IFS= read -r _cloudburst_line; do
            _cloudburst_name="${_cloudburst_line#export }"; _cloudburst_name="${_cloudburst_name%%=*}"
            [[ -n "${!_cloudburst_name:-}" && "$_cloudburst_name" != PGPASSFILE ]] || eval "$_cloudburst_line"
        done < <("$_cloudburst_root/infra/postgres.sh" env)
        unset _cloudburst_line _cloudburst_name ;;
    *) echo "CLOUDBURST_STORE must be sqlite or postgres, not '${CLOUDBURST_STORE}'" >&2; return 1 ;;
esac
if [[ -z "${MLFLOW_TRACKING_URI:-}" ]]; then
    export MLFLOW_TRACKING_URI="sqlite:///$_cloudburst_root/var/mlflow/mlflow.db"
fi

# Prepend plugins/ once, keeping whatever PYTHONPATH already holds.
case ":${PYTHONPATH:-}:" in
    *":$_cloudburst_root/plugins:"*) ;;
    *) export PYTHONPATH="$_cloudburst_root/plugins${PYTHONPATH:+:$PYTHONPATH}" ;;
esac

unset _cloudburst_root _cloudburst_api_host
