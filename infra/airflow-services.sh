#!/usr/bin/env bash
# Airflow for this checkout, the lean way: api-server, scheduler and dag-processor as three background
# processes (no `airflow standalone`), state under var/airflow.
#   infra/airflow-services.sh up       migrate the metadata DB, start what is not running, wait for the UI
#   infra/airflow-services.sh down     SIGTERM, up to 20 s grace, then SIGKILL
#   infra/airflow-services.sh status   one line per service
# Store: CLOUDBURST_STORE=postgres (make airflow-up STORE=postgres) starts infra/postgres.sh first.
# Port: CLOUDBURST_AIRFLOW_PORT (default 8080). Logs: var/airflow/logs/<service>.log; pids: var/airflow/run/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=infra/airflow-env.sh
source "$ROOT/infra/airflow-env.sh"

BIN="$ROOT/.venv/airflow/bin"
RUN_DIR="$AIRFLOW_HOME/run"
LOG_DIR="$AIRFLOW_HOME/logs"
SERVICES=(api-server scheduler dag-processor)
HEALTH_TIMEOUT=90
STOP_GRACE=20
BROWSE_HOST="$AIRFLOW__API__HOST"
[[ "$BROWSE_HOST" == "0.0.0.0" || "$BROWSE_HOST" == "::" ]] && BROWSE_HOST=127.0.0.1
URL="http://$BROWSE_HOST:$AIRFLOW__API__PORT"
HEALTH_URL="$URL/api/v2/monitor/health"

pid_file() { echo "$RUN_DIR/$1.pid"; }

# The service's pid if its pid file names a live airflow process, else nothing (and a stale file is removed).
running_pid() {
    local file pid
    file="$(pid_file "$1")"
    [[ -f "$file" ]] || return 1
    pid="$(<"$file")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q airflow; then
        echo "$pid"
        return 0
    fi
    rm -f "$file"
    return 1
}

# While the api-server runs, its URL is the one it was started with (status needs no CLOUDBURST_AIRFLOW_PORT).
load_running_url() {
    if running_pid api-server >/dev/null && [[ -s "$RUN_DIR/api-server.url" ]]; then
        URL="$(<"$RUN_DIR/api-server.url")"
        HEALTH_URL="$URL/api/v2/monitor/health"
    else
        rm -f "$RUN_DIR/api-server.url"
    fi
}

healthy() { curl -fsS --max-time 3 "$HEALTH_URL" >/dev/null 2>&1; }

port_in_use() { (exec 3<>"/dev/tcp/$BROWSE_HOST/$AIRFLOW__API__PORT") 2>/dev/null; }

password_file() {
    echo "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:-$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated}"
}

print_login() {
    local file password=""
    file="$(password_file)"
    for _ in $(seq 1 20); do  # the api-server writes the file while starting; give it a moment
        [[ -s "$file" ]] && break
        sleep 0.5
    done
    if [[ -s "$file" ]]; then
        password="$("$BIN/python" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("admin", ""))' "$file")"
    fi
    echo "Airflow UI:  $URL"
    if [[ -n "$password" ]]; then
        echo "Login:       user admin, password $password   (from $file)"
    else
        echo "Login:       user admin; password not found yet in $file (see $LOG_DIR/api-server.log)"
    fi
}

# `airflow db migrate` costs ~4 s even with nothing to do; skip it while the same Airflow version has already
# migrated the same database file (the stamp lives in var/airflow/run, which `make clean` removes with the DB).
migrate() {
    local dist stamp_file stamp db_uri db_file inode=""
    dist="$(cd "$ROOT/.venv/airflow/lib"/python3*/site-packages && ls -d apache_airflow-*.dist-info 2>/dev/null | head -1)"
    db_uri="${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-sqlite:///$AIRFLOW_HOME/airflow.db}"
    db_file="${db_uri#sqlite:///}"
    [[ "$db_uri" == sqlite:///* && -f "$db_file" ]] && inode="$(stat -c %i "$db_file")"
    stamp="$dist $db_uri $inode"
    stamp_file="$RUN_DIR/db-migrated"
    if [[ -n "$inode" && -f "$stamp_file" && "$(<"$stamp_file")" == "$stamp" ]]; then
        return 0
    fi
    echo "Migrating the Airflow metadata database ($db_uri) ..."
    if ! "$BIN/airflow" db migrate >"$LOG_DIR/db-migrate.log" 2>&1; then
        echo "airflow db migrate failed; see $LOG_DIR/db-migrate.log" >&2
        tail -n 20 "$LOG_DIR/db-migrate.log" >&2
        exit 1
    fi
    [[ "$db_uri" == sqlite:///* && -f "$db_file" ]] && inode="$(stat -c %i "$db_file")"
    echo "$dist $db_uri $inode" >"$stamp_file"
}

start_service() {
    local service="$1" log pid
    log="$LOG_DIR/$service.log"
    echo "=== $(date -Is) starting airflow $service" >>"$log"
    # setsid: own session and process group, so `down` can reach the service's children too; nohup: survives
    # the terminal. Without job control the background child is no group leader, so setsid execs in place
    # and $! is the service's own pid.
    nohup setsid "$BIN/airflow" "$service" >>"$log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$(pid_file "$service")"
    [[ "$service" == api-server ]] && echo "$URL" >"$RUN_DIR/api-server.url"
    echo "started $service (pid $pid, log ${log#"$ROOT/"})"
}

cmd_up() {
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    if [[ "${CLOUDBURST_STORE:-sqlite}" == postgres ]]; then
        "$ROOT/infra/postgres.sh" up
    fi
    local missing=() service
    for service in "${SERVICES[@]}"; do
        running_pid "$service" >/dev/null || missing+=("$service")
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        echo "Airflow is already running (api-server, scheduler, dag-processor); nothing to do."
        print_login
        return 0
    fi
    if [[ " ${missing[*]} " == *" api-server "* ]] && port_in_use; then
        echo "Port $AIRFLOW__API__PORT on $BROWSE_HOST is taken by another process;" \
             "set CLOUDBURST_AIRFLOW_PORT to a free port." >&2
        exit 1
    fi
    migrate
    # The scaling study's pool (plugins/cloudburst_study.py); the scheduler holds a task of a missing pool.
    "$BIN/python" -c "from cloudburst_study import ensure_study_pool; ensure_study_pool()" \
        >>"$LOG_DIR/db-migrate.log" 2>&1 || { echo "could not create the cloudburst_cluster pool" >&2; exit 1; }
    for service in "${missing[@]}"; do
        start_service "$service"
    done
    printf 'Waiting for %s ' "$HEALTH_URL"
    local waited=0
    until healthy; do
        if ! running_pid api-server >/dev/null; then
            echo
            echo "The api-server exited; last lines of $LOG_DIR/api-server.log:" >&2
            tail -n 30 "$LOG_DIR/api-server.log" >&2
            exit 1
        fi
        if (( waited >= HEALTH_TIMEOUT )); then
            echo
            echo "No answer from $HEALTH_URL after ${HEALTH_TIMEOUT} s; see $LOG_DIR/api-server.log" >&2
            exit 1
        fi
        printf '.'
        sleep 1
        waited=$((waited + 1))
    done
    echo " up after ${waited} s"
    for service in "${SERVICES[@]}"; do
        if ! running_pid "$service" >/dev/null; then
            echo "warning: $service is not running; see $LOG_DIR/$service.log" >&2
        fi
    done
    print_login
}

stop_service() {
    local service="$1" pid waited=0
    if ! pid="$(running_pid "$service")"; then
        echo "$service: not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && (( waited < STOP_GRACE * 10 )); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$service (pid $pid) ignored SIGTERM for ${STOP_GRACE} s; sending SIGKILL"
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    # Children left in the service's own process group (workers, parsers): TERM, a short grace, then KILL.
    if pgrep -g "$pid" >/dev/null 2>&1; then
        kill -TERM -- "-$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            pgrep -g "$pid" >/dev/null 2>&1 || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$(pid_file "$service")"
    [[ "$service" == api-server ]] && rm -f "$RUN_DIR/api-server.url"
    echo "$service: stopped (was pid $pid)"
}

cmd_down() {
    local service
    # Scheduler first, so it does not hand new work to a disappearing api-server.
    for service in scheduler dag-processor api-server; do
        stop_service "$service"
    done
}

cmd_status() {
    local service pid extra
    for service in "${SERVICES[@]}"; do
        if pid="$(running_pid "$service")"; then
            extra=""
            if [[ "$service" == api-server ]]; then
                if healthy; then extra="  $URL (healthy)"; else extra="  $URL (not answering yet)"; fi
            fi
            printf '%-14s running (pid %s)%s\n' "$service" "$pid" "$extra"
        else
            printf '%-14s stopped\n' "$service"
        fi
    done
}

load_running_url
case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
