#!/usr/bin/env bash
# The compose stack's PostgreSQL (Debian's 15, from the project's image) in the foreground: initialised once on the
# volume like infra/postgres.sh does for a checkout (role cloudburst, databases airflow and mlflow, password login),
# but listening on the service's name for the other containers.
#   POSTGRES_PASSWORD   the role's password (compose passes CLOUDBURST_POSTGRES_PASSWORD)
set -euo pipefail

data="${CLOUDBURST_POSTGRES_DATA:-/data/postgres}"
listen="${CLOUDBURST_POSTGRES_LISTEN:-*}"
role=cloudburst
databases=(airflow mlflow)
bin="$(ls -d /usr/lib/postgresql/*/bin | tail -1)"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (compose: CLOUDBURST_POSTGRES_PASSWORD)}"

as_postgres() { runuser -u postgres -- "$@"; }

if [ ! -f "$data/PG_VERSION" ]; then
  echo "initialising PostgreSQL in $data"
  mkdir -p "$data" /run/postgresql
  chown postgres: "$data" /run/postgresql
  as_postgres "$bin/initdb" -D "$data" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8
  # The other containers connect over the compose network (any address), always with the password.
  echo "host all all all scram-sha-256" >> "$data/pg_hba.conf"
  as_postgres "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start
  # The password goes over stdin, never on a command line.
  as_postgres "$bin/psql" -q -v ON_ERROR_STOP=1 -v password="$POSTGRES_PASSWORD" <<SQL
CREATE ROLE $role LOGIN PASSWORD :'password';
SQL
  for database in "${databases[@]}"; do as_postgres "$bin/createdb" -O "$role" "$database"; done
  as_postgres "$bin/pg_ctl" -D "$data" -m fast -w stop
fi
mkdir -p /run/postgresql && chown postgres: /run/postgresql
exec runuser -u postgres -- "$bin/postgres" -D "$data" -c "listen_addresses=$listen"
