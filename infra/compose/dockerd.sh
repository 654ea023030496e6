#!/usr/bin/env bash
# Debian's dockerd for a machine that must keep its network as it is (this one runs infra/cluster/netns.sh's bridge):
# no iptables rules, no masquerading, so the FORWARD policy and bridged traffic stay untouched. Containers then reach
# outside only with host networking (builds: docker build --network host; the stack: infra/compose/host-network.yaml).
#   infra/compose/dockerd.sh start|stop|status      (root; state in var/compose/dockerd: pid, log)
# A machine with an ordinary Docker installation needs none of this.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="$repo_root/var/compose/dockerd"
pid_file="$state/dockerd.pid"
data_root="${CLOUDBURST_DOCKER_DATA_ROOT:-/var/lib/docker}"

running_pid() {
  local pid
  [ -f "$pid_file" ] || return 1
  pid="$(<"$pid_file")"
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && echo "$pid"
}

case "${1:-}" in
  start)
    if pid="$(running_pid)"; then echo "dockerd already running (pid $pid)"; exit 0; fi
    mkdir -p "$state"
    setsid dockerd --iptables=false --ip-masq=false --data-root "$data_root" \
      --pidfile "$state/dockerd.daemon.pid" >"$state/dockerd.log" 2>&1 < /dev/null &
    echo $! > "$pid_file"
    for _ in $(seq 60); do
      if docker info >/dev/null 2>&1; then echo "dockerd up (pid $(<"$pid_file"), log $state/dockerd.log)"; exit 0; fi
      sleep 1
    done
    echo "dockerd did not answer within 60 s; see $state/dockerd.log" >&2; exit 1 ;;
  stop)
    if ! pid="$(running_pid)"; then echo "dockerd not running"; exit 0; fi
    kill -TERM "$pid"
    for _ in $(seq 60); do [ -d "/proc/$pid" ] || break; sleep 1; done
    if [ -d "/proc/$pid" ]; then echo "dockerd (pid $pid) still running after 60 s" >&2; exit 1; fi
    rm -f "$pid_file"
    # dockerd leaves its default bridge and a bind mount of the host's network namespace behind.
    if ip link show docker0 >/dev/null 2>&1; then ip link delete docker0; fi
    if mountpoint -q /run/docker/netns/default; then umount /run/docker/netns/default; fi
    echo "dockerd stopped" ;;
  status)
    if pid="$(running_pid)"; then echo "dockerd running (pid $pid)"; else echo "dockerd not running"; exit 3; fi ;;
  *) echo "usage: infra/compose/dockerd.sh start|stop|status" >&2; exit 2 ;;
esac
