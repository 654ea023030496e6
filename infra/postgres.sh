#!/usr/bin/env bash
# A PostgreSQL cluster of this checkout's own for Airflow's metadata and MLflow's backend store (STORE=postgres),
# the way a team's deployment runs them; SQLite stays the embedded default. Debian's PostgreSQL 15 binaries, state
# under var/postgres (data, socket, log), 127.0.0.1 only, password login for the role `cloudburst`.
#   infra/postgres.sh up       initialise once (databases airflow and mlflow), start if stopped, wait until ready
#   infra/postgres.sh down     fast shutdown (open sessions are ended), bounded wait
#   infra/postgres.sh status   one line
#   infra/postgres.sh env      export lines: PGPASSFILE, CLOUDBURST_POSTGRES_URI and the two stores' URIs
# The password is generated at initialisation and kept in var/postgres/pgpass (mode 600), which libpq, psycopg2 and
# asyncpg read through PGPASSFILE: no URI, log or MLflow param ever carries it.
# Port: CLOUDBURST_POSTGRES_PORT (default 5433; Debian's own cluster, if any, keeps 5432).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="$ROOT/var/postgres"
PGPASS="$STATE/pgpass"
# The server's own files (data, socket, log) belong to the user it runs as; as root that is Debian's postgres user,
# who must reach them: under var/ when every folder above the checkout is searchable by others, else (a checkout
# under a private folder, e.g. a mode-700 temporary one) in a folder of its own under /var/lib/cloudburst.
if [[ "$(id -u)" == 0 ]] && ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null; then
    SERVER="/var/lib/cloudburst/postgres-$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)"
else
    SERVER="$STATE"
fi
DATA="$SERVER/data"
SOCKET_DIR="$SERVER/run"
LOG_DIR="$SERVER/log"
LOG="$LOG_DIR/postgres.log"
PORT="${CLOUDBURST_POSTGRES_PORT:-5433}"
if ! [[ "$PORT" =~ ^[1-9][0-9]{0,4}$ ]] || (( PORT > 65535 )); then
    echo "CLOUDBURST_POSTGRES_PORT must be a port number from 1 to 65535, not '$PORT'" >&2
    exit 2
fi
ROLE=cloudburst
DATABASES=(airflow mlflow)
START_TIMEOUT=60
STOP_TIMEOUT=30

bin_dir() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [[ -x "$dir/pg_ctl" ]] && { echo "$dir"; return 0; }
    done
    echo "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl): run make setup, or apt-get install postgresql" >&2
    exit 1
}
BIN="$(bin_dir)"

# PostgreSQL refuses to run as root: as root, the server and its tools run as Debian's `postgres` user.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        (cd / && runuser -u postgres -- "$@")  # from /: the caller's folder may be closed to that user
    else
        "$@"
    fi
}

ready() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 2; }

running() { [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

# The port a running server listens on (postmaster.pid's fourth line): the one it was started with.
running_port() { sed -n 4p "$DATA/postmaster.pid" 2>/dev/null; }

# A running server answers on its own port, whatever CLOUDBURST_POSTGRES_PORT says now.
if running; then
    started_on="$(running_port)"
    if [[ -n "$started_on" && "$started_on" != "$PORT" && "${1:-}" == up ]]; then
        echo "this checkout's PostgreSQL already runs on port $started_on, not $PORT: make postgres-down first" >&2
        exit 2
    fi
    PORT="${started_on:-$PORT}"
fi

uri() { echo "postgresql://$ROLE@127.0.0.1:$PORT"; }

initialise() {
    local password superuser_pass
    echo "Initialising a PostgreSQL cluster in $DATA (port $PORT) ..."
    mkdir -p "$STATE" "$SERVER"
    rm -rf "$DATA" "$SOCKET_DIR" "$LOG_DIR"
    mkdir -p "$DATA" "$SOCKET_DIR" "$LOG_DIR"
    if [[ "$(id -u)" == 0 ]]; then
        chown postgres: "$DATA" "$SOCKET_DIR" "$LOG_DIR"
        if ! runuser -u postgres -- test -w "$DATA"; then
            echo "the postgres user cannot write $DATA" >&2
            exit 1
        fi
    fi
    password="$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | cut -c1-24)"
    superuser_pass="$(mktemp)"
    head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$superuser_pass"
    [[ "$(id -u)" == 0 ]] && chown postgres: "$superuser_pass"
    # Local socket: the server's own OS user only (peer). TCP: passwords (SCRAM), 127.0.0.1 only.
    as_owner "$BIN/initdb" -D "$DATA" -U postgres --pwfile="$superuser_pass" --auth-local=peer \
        --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$STATE/initdb.log" 2>&1 \
        || { rm -f "$superuser_pass"; cat "$STATE/initdb.log" >&2; exit 1; }
    rm -f "$superuser_pass"
    start_server
    as_owner "$BIN/psql" -q -h "$SOCKET_DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$password'" >/dev/null
    for database in "${DATABASES[@]}"; do
        as_owner "$BIN/createdb" -h "$SOCKET_DIR" -p "$PORT" -U postgres -O "$ROLE" "$database"
    done
    # Written last: its presence says the cluster is complete (an interrupted initialise is redone).
    # Any port: the server may be started on another one later (CLOUDBURST_POSTGRES_PORT).
    (umask 077 && echo "127.0.0.1:*:*:$ROLE:$password" >"$PGPASS.tmp" && mv "$PGPASS.tmp" "$PGPASS")
}

start_server() {
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$START_TIMEOUT" \
        -o "-p $PORT -k $SOCKET_DIR -c listen_addresses=127.0.0.1" start >/dev/null \
        || { echo "PostgreSQL did not start within ${START_TIMEOUT} s; last lines of $LOG:" >&2; tail -n 20 "$LOG" >&2; exit 1; }
}

cmd_up() {
    if [[ ! -s "$PGPASS" ]]; then
        if running; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null; fi
        initialise
    elif ! running; then
        start_server
    fi
    if ! ready; then
        echo "PostgreSQL runs but does not answer on 127.0.0.1:$PORT (another server on that port? see $LOG)" >&2
        exit 1
    fi
    echo "PostgreSQL: $(uri) (databases ${DATABASES[*]}; password in $PGPASS)"
}

cmd_down() {
    if running; then
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null
        echo "PostgreSQL: stopped"
    else
        echo "PostgreSQL: not running"
    fi
}

cmd_status() {
    if running && ready; then
        echo "PostgreSQL: running, $(uri)"
    elif running; then
        echo "PostgreSQL: running, not answering on 127.0.0.1:$PORT"
    else
        echo "PostgreSQL: stopped"
        return 1
    fi
}

cmd_env() {
    echo "export PGPASSFILE='$PGPASS'"
    echo "export CLOUDBURST_POSTGRES_URI='$(uri)'"
    echo "export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN='postgresql+psycopg2://$ROLE@127.0.0.1:$PORT/airflow'"
    # The driver named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3's, which is not installed.
    echo "export MLFLOW_TRACKING_URI='postgresql+psycopg2://$ROLE@127.0.0.1:$PORT/mlflow'"
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
