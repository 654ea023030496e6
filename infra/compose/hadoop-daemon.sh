#!/usr/bin/env bash
# One Hadoop 3.5.0 daemon in the foreground, as a compose service's command: the jars infra/hadoop/resolve.sh put in
# the image, the configuration infra/compose/hadoop-conf.sh rendered ($HADOOP_CONF_DIR), logs on stdout (log4j's console).
#   infra/compose/hadoop-daemon.sh namenode|datanode|resourcemanager|nodemanager
# The namenode formats its volume the first time (like infra/hadoop/hadoop.sh up).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
daemon="${1:?usage: infra/compose/hadoop-daemon.sh namenode|datanode|resourcemanager|nodemanager}"
var_dir="${CLOUDBURST_COMPOSE_HADOOP_DIR:-/data/hadoop}"
# shellcheck source=infra/hadoop/daemons.sh
source "$repo_root/infra/hadoop/daemons.sh"
main="$(main_class "$daemon")"
[ -n "$main" ] || { echo "hadoop-daemon.sh: unknown daemon '$daemon'" >&2; exit 2; }

dist="$("$repo_root/infra/hadoop/resolve.sh" | tail -1)"
classpath="$HADOOP_CONF_DIR:$dist/resources:$dist/lib/*"
# hadoop.sh's heaps (1.5 GB in all); CLOUDBURST_<DAEMON>_HEAP overrides one.
case "$daemon" in namenode) heap=384m ;; datanode) heap=256m ;; resourcemanager) heap=512m ;; nodemanager) heap=384m ;; esac
heap_var="CLOUDBURST_$(tr '[:lower:]' '[:upper:]' <<<"$daemon")_HEAP"
# shellcheck disable=SC2206
jvm_opts=("-Xmx${!heap_var:-$heap}" $SMALL_CLUSTER_JAVA_OPTS -Djava.net.preferIPv4Stack=true
          "-Dhadoop.log.dir=$var_dir/logs" "-Dyarn.log.dir=$var_dir/logs" "-Dhadoop.home.dir=$dist" "-Dproc_$daemon")
mkdir -p "$var_dir/logs" "$var_dir/tmp" "$var_dir/yarn/local" "$var_dir/data"

if [ "$daemon" = namenode ] && [ ! -f "$var_dir/data/namenode/current/VERSION" ]; then
  echo "formatting HDFS in $var_dir/data/namenode (first start)"
  java "${jvm_opts[@]}" -cp "$classpath" org.apache.hadoop.hdfs.server.namenode.NameNode \
    -format -nonInteractive -clusterid cloudburst
fi
cd "$var_dir"
exec java "${jvm_opts[@]}" -cp "$classpath" "$main"
