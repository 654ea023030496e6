#!/usr/bin/env bash
# `make compose-test`: the compose stack end to end. Builds the image (Docker's layer cache makes a second build take
# seconds), brings the stack up and waits for every health check, triggers the mnist_elastic_cnn DAG through Airflow's
# REST API on a small MNIST (2,000 training and 500 test images, one epoch), waits for the run, checks its MLflow run
# through MLflow's REST API (test_accuracy logged, artifacts served by the server), and brings the stack down with its
# volumes, on failure too (then the services' logs are kept in var/compose/logs/). Each phase is timed.
# Settings (environment):
#   DOCKER, COMPOSE                       the clients (default: docker, docker-compose)
#   CLOUDBURST_BASE_IMAGE                 the Dockerfile's BASE_IMAGE (default: its FROM, python:3.11-slim-bookworm;
#                                         no registry: infra/compose/base-image.sh builds cloudburst-base:bookworm)
#   CLOUDBURST_COMPOSE_HOST_NETWORK=1     host networking (infra/compose/host-network.yaml) for the build and the stack
#   CLOUDBURST_COMPOSE_KEEP=1             leave the stack up afterwards (bring it down with docker-compose -p … down -v)
#   CLOUDBURST_COMPOSE_UP_TIMEOUT (600 s), CLOUDBURST_COMPOSE_RUN_TIMEOUT (1800 s)
# With no engine answering, as root on Debian, it installs Debian's docker.io, docker-compose and debootstrap, starts
# dockerd the way infra/compose/dockerd.sh does (no iptables: host networking) and stops it again at the end; with
# no image registry reachable it builds the base image from Debian packages (infra/compose/base-image.sh) first.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
docker="${DOCKER:-docker}"
# A client without the buildx plugin cannot build with BuildKit (the Dockerfile's cache mounts need it): Debian's
# own client can, where both are installed.
if [ -z "${DOCKER:-}" ] && ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
  docker=/usr/bin/docker
fi
compose_bin="${COMPOSE:-docker-compose}"
project=cloudburst-test
dag_id=mnist_elastic_cnn
conf='{"train_limit": 2000, "test_limit": 500, "epochs": 1}'
up_timeout="${CLOUDBURST_COMPOSE_UP_TIMEOUT:-600}"
run_timeout="${CLOUDBURST_COMPOSE_RUN_TIMEOUT:-1800}"
airflow_url=http://localhost:8080
mlflow_url=http://localhost:5000
password="${CLOUDBURST_AIRFLOW_PASSWORD:-cloudburst-local-only}"
logs_dir="$repo_root/var/compose/logs"

say() { printf '[compose-test %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# An engine: the one that answers, else (root, Debian) Debian's, started here without iptables and stopped at the end.
started_engine=false
if ! "$docker" info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "FAILED: no Docker engine answers ($docker info); start one, or run as root on Debian to let this script start its own" >&2
    exit 1
  fi
  missing=()
  for package in docker.io docker-compose debootstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})); then
    say "no Docker engine answers: installing Debian's ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [ -z "${DOCKER:-}" ] && [ -x /usr/bin/docker ] && docker=/usr/bin/docker
  if ! "$docker" info >/dev/null 2>&1; then  # a systemd host starts the package's own dockerd; this one did not
    infra/compose/dockerd.sh start
    started_engine=true
    export CLOUDBURST_COMPOSE_HOST_NETWORK=1  # no iptables: no published ports, no way out but the host's network
  fi
fi
stop_engine() { if $started_engine; then infra/compose/dockerd.sh stop || true; fi; }
trap stop_engine EXIT  # replaced by finish (below), which calls it too, once the stack may be up

# A base image: the Dockerfile's default where a registry gives it, else one bootstrapped from Debian packages.
if [ -z "${CLOUDBURST_BASE_IMAGE:-}" ]; then
  default_base="$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)"
  if ! "$docker" image inspect "$default_base" >/dev/null 2>&1 \
      && ! timeout 120 "$docker" pull "$default_base" >/dev/null 2>&1; then
    export CLOUDBURST_BASE_IMAGE=cloudburst-base:bookworm
    if ! "$docker" image inspect "$CLOUDBURST_BASE_IMAGE" >/dev/null 2>&1; then
      say "no registry gives $default_base: building $CLOUDBURST_BASE_IMAGE from Debian packages"
      DOCKER="$docker" infra/compose/base-image.sh
    fi
  fi
fi

files=(-f docker-compose.yaml)
build_args=()
if [ "${CLOUDBURST_COMPOSE_HOST_NETWORK:-0}" = 1 ]; then
  # Docker's v1 client refuses published ports beside network_mode host ('"host" network_mode is incompatible with
  # port_bindings') and an override file cannot take a list away: the merged configuration, minus ports. Plus the
  # machine's own host name, which the containers' /etc/hosts lacks and Hadoop's daemons look up at start
  # (java.net.UnknownHostException: <host>: Name or service not known).
  mkdir -p var/compose
  "$compose_bin" -f docker-compose.yaml -f infra/compose/host-network.yaml config \
    | python3 -c 'import socket, sys, yaml
config = yaml.safe_load(sys.stdin)
for service in config["services"].values():
    service.pop("ports", None)
    service["extra_hosts"][socket.gethostname()] = "127.0.0.1"  # config writes them as a mapping
yaml.safe_dump(config, sys.stdout, sort_keys=False)' > var/compose/host-network.resolved.yaml
  files=(-f var/compose/host-network.resolved.yaml)
  build_args+=(--network host)
fi
[ -z "${CLOUDBURST_BASE_IMAGE:-}" ] || build_args+=(--build-arg "BASE_IMAGE=$CLOUDBURST_BASE_IMAGE")
compose() { "$compose_bin" -p "$project" "${files[@]}" "$@"; }

log() { printf '[compose-test %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() { log "FAILED: $*" >&2; exit 1; }
declare -a timings=()
phase_start=$SECONDS
begin() { phase_start=$SECONDS; log "$1"; }
end() { timings+=("$1 $((SECONDS - phase_start)) s"); log "$1 took $((SECONDS - phase_start)) s"; }
json() { python3 -c "import json, sys; data = json.load(sys.stdin); $1"; }

stack_started=false
finish() {
  local status=$?
  if $stack_started; then
    if ((status != 0)); then
      mkdir -p "$logs_dir"
      for service in $(compose config --services); do
        compose logs --no-color --tail 300 "$service" > "$logs_dir/$service.log" 2>&1 || true
      done
      log "services' logs: ${logs_dir#"$repo_root/"}/"
    fi
    if [ "${CLOUDBURST_COMPOSE_KEEP:-0}" = 1 ]; then
      log "left up (CLOUDBURST_COMPOSE_KEEP=1): $compose_bin -p $project ${files[*]} down -v"
    else
      begin "down"
      compose down -v --remove-orphans || true
      end down
    fi
  fi
  stop_engine
  log "times: $(IFS=';'; echo "${timings[*]}")"
  ((status == 0)) && log "PASSED" || log "FAILED (exit $status)"
  exit "$status"
}
trap finish EXIT

begin "build (image cloudburst:local${CLOUDBURST_BASE_IMAGE:+ on $CLOUDBURST_BASE_IMAGE})"
DOCKER_BUILDKIT=1 "$docker" build "${build_args[@]}" -t cloudburst:local .
end build

begin "up"
stack_started=true
compose up -d --no-build
# Every service with a health check healthy, airflow-init exited 0, the others running.
deadline=$((SECONDS + up_timeout))
while true; do
  waiting=()
  for service in $(compose config --services); do
    id="$(compose ps -q "$service")"
    [ -n "$id" ] || { waiting+=("$service:absent"); continue; }
    state="$("$docker" inspect -f '{{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")"
    case "$service:$state" in
      airflow-init:"exited 0 "*) ;;
      airflow-init:exited*) fail "airflow-init (airflow db migrate) exited: $state" ;;
      *:"running 0 healthy"|*:"running 0 ") ;;
      *) waiting+=("$service:${state// /,}") ;;
    esac
  done
  ((${#waiting[@]} == 0)) && break
  ((SECONDS < deadline)) || fail "not healthy within $up_timeout s: ${waiting[*]}"
  sleep 5
done
end up

begin "DAG run ($dag_id, conf $conf)"
token="$(curl -fsS -X POST "$airflow_url/auth/token" -H 'Content-Type: application/json' \
  -d "{\"username\": \"admin\", \"password\": \"$password\"}" | json 'print(data["access_token"])')" \
  || fail "no token from $airflow_url/auth/token"
api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
deadline=$((SECONDS + 300))
until api -o /dev/null "$airflow_url/api/v2/dags/$dag_id" 2>/dev/null; do
  ((SECONDS < deadline)) || fail "the dag-processor did not serialise $dag_id within 300 s"
  sleep 5
done
api -X PATCH "$airflow_url/api/v2/dags/$dag_id" -d '{"is_paused": false}' > /dev/null
triggered_ms="$(($(date +%s) * 1000))"
run_id="$(api -X POST "$airflow_url/api/v2/dags/$dag_id/dagRuns" \
  -d "{\"logical_date\": null, \"conf\": $conf}" | json 'print(data["dag_run_id"])')"
log "triggered $run_id"
deadline=$((SECONDS + run_timeout))
state=queued
while [[ "$state" != success && "$state" != failed ]]; do
  ((SECONDS < deadline)) || fail "$run_id still $state after $run_timeout s"
  sleep 10
  state="$(api "$airflow_url/api/v2/dags/$dag_id/dagRuns/$run_id" | json 'print(data["state"])')"
done
api "$airflow_url/api/v2/dags/$dag_id/dagRuns/$run_id/taskInstances" \
  | json 'print("\n".join("  %s: %s (%.0f s)" % (t["task_id"], t["state"], t["duration"] or 0) for t in data["task_instances"]))'
[ "$state" = success ] || fail "$run_id ended $state"
end "DAG run"

begin "MLflow check"
# The newest run started since the trigger, in any experiment, with test_accuracy among its metrics.
experiments="$(curl -fsS "$mlflow_url/api/2.0/mlflow/experiments/search?max_results=1000" \
  | json 'print(json.dumps([e["experiment_id"] for e in data.get("experiments", [])]))')"
run="$(curl -fsS -X POST "$mlflow_url/api/2.0/mlflow/runs/search" -H 'Content-Type: application/json' \
  -d "{\"experiment_ids\": $experiments, \"filter\": \"attributes.start_time >= $triggered_ms\", \"max_results\": 50,
       \"order_by\": [\"attributes.start_time DESC\"]}")"
summary="$(json '
runs = [r for r in data.get("runs", []) if any(m["key"] == "test_accuracy" for m in r["data"].get("metrics", []))]
if not runs:
    sys.exit("no MLflow run since the trigger has test_accuracy")
run = runs[0]
metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
params = {p["key"]: p["value"] for p in run["data"].get("params", [])}
print(run["info"]["run_id"], run["info"]["run_name"], metrics["test_accuracy"], params.get("workload", "?"),
      run["info"]["artifact_uri"])' <<<"$run")" || fail "MLflow: $summary"
read -r mlflow_run_id run_name accuracy workload artifact_uri <<<"$summary"
log "MLflow run $run_name ($mlflow_run_id): workload $workload, test_accuracy $accuracy, artifacts $artifact_uri"
[[ "$artifact_uri" == mlflow-artifacts:* ]] || fail "artifacts are not served by the MLflow server: $artifact_uri"
artifacts="$(curl -fsS "$mlflow_url/api/2.0/mlflow/artifacts/list?run_id=$mlflow_run_id" \
  | json 'print(" ".join(f["path"] for f in data.get("files", [])))')"
log "artifacts: ${artifacts:-none}"
end "MLflow check"
