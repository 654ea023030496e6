#!/usr/bin/env bash
# Renders infra/hadoop/conf/*.template (the single-machine cluster's configuration, which infra/hadoop/hadoop.sh fills
# with 127.0.0.1 and its ports) for the compose stack, where every daemon is a service reached by its name:
# a property's 127.0.0.1 becomes the host of the daemon that owns it (fs.defaultFS and dfs.namenode.* -> namenode,
# dfs.datanode.* -> datanode, yarn.resourcemanager.* -> resourcemanager, yarn.nodemanager.* -> nodemanager); ports are
# hadoop.sh's defaults (its PORTS table); state under /data/hadoop (the services' volumes).
#   infra/compose/hadoop-conf.sh OUT_DIR            (the Dockerfile runs it: HADOOP_CONF_DIR=/opt/cloudburst/hadoop-conf)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
templates="$repo_root/infra/hadoop/conf"
out="${1:?usage: infra/compose/hadoop-conf.sh OUT_DIR}"
var_dir="${CLOUDBURST_COMPOSE_HADOOP_DIR:-/data/hadoop}"

sed_args=()
# hadoop.sh's table: "    NAME   CLOUDBURST_VARIABLE   DEFAULT   # comment"
while read -r name _ default _; do
  sed_args+=(-e "s|@@$name@@|$default|g")
done < <(sed -n '/^PORTS=(/,/^)/p' "$repo_root/infra/hadoop/hadoop.sh" | grep -E '^\s+[A-Z_]+\s+CLOUDBURST_[A-Z_]+\s+[0-9]+')
[ "${#sed_args[@]}" -ge 20 ] || { echo "hadoop-conf.sh: could not read the PORTS table of infra/hadoop/hadoop.sh" >&2; exit 1; }
sed_args+=(-e "s|@@VAR_DIR@@|$var_dir|g" -e "s|@@DATA_DIR@@|$var_dir/data|g" -e "s|@@USER@@|cloudburst|g"
           -e "s|@@NM_MEMORY_MB@@|${CLOUDBURST_YARN_MEMORY_MB:-12288}|g" -e "s|@@NM_VCORES@@|${CLOUDBURST_YARN_VCORES:-8}|g")
# Whose address a property is: its name decides.
sed_args+=(-e '/<name>fs\.defaultFS<\|<name>dfs\.namenode\./s/127\.0\.0\.1/namenode/g'
           -e '/<name>dfs\.datanode\./s/127\.0\.0\.1/datanode/g'
           -e '/<name>yarn\.resourcemanager\./s/127\.0\.0\.1/resourcemanager/g'
           -e '/<name>yarn\.nodemanager\./s/127\.0\.0\.1/nodemanager/g')

mkdir -p "$out"
for template in "$templates"/*.template; do
  file="$out/$(basename "$template" .template)"
  sed "${sed_args[@]}" "$template" > "$file"
  if grep -q '@@[A-Z_]*@@' "$file"; then
    echo "hadoop-conf.sh: unfilled placeholder in $file: $(grep -o '@@[A-Z_]*@@' "$file" | head -1)" >&2; exit 1
  fi
  # Only comments may still say loopback.
  if grep -v '^\s*<!--' "$file" | grep -q '<value>[^<]*127\.0\.0\.1'; then
    echo "hadoop-conf.sh: a property of $file still names 127.0.0.1 (no rule maps it to a service):" >&2
    grep -n '<value>[^<]*127\.0\.0\.1' "$file" >&2; exit 1
  fi
done
echo "Hadoop configuration for the compose services in $out"
