#!/usr/bin/env bash
# Several hosts on one machine: an Apache Hadoop cluster (HDFS + YARN, the jars of infra/hadoop/pom.xml) whose
# hosts are Linux network namespaces joined by a bridge, each link shaped with tc (tbf: bandwidth only; this
# kernel has no netem, so latency is what it is — `status` measures it). Root only.
#
#   infra/cluster/netns.sh up [NODES] [LINK]   a master host (NameNode, ResourceManager) and NODES worker hosts
#                                              (DataNode + NodeManager each; HDFS replication 2, or 1 with one
#                                              worker), links shaped to LINK (e.g. 100mbit, 1gbit, 10gbit);
#                                              waits until HDFS has NODES live DataNodes and YARN NODES RUNNING
#                                              NodeManagers. Defaults: NODES=3, LINK=1gbit. "already up" when
#                                              the same cluster runs; another NODES is refused (down first),
#                                              another LINK re-shapes the links.
#   infra/cluster/netns.sh shape LINK          re-shape a running cluster's links to LINK in place (daemons, data
#                                              and running jobs stay); a scaling study's link profiles use it
#   infra/cluster/netns.sh down                stops every daemon it started (SIGTERM, then SIGKILL), removes
#                                              every namespace, link, bridge, cgroup and /etc/netns entry it made;
#                                              idempotent, and finds them by name after a crash too
#   infra/cluster/netns.sh wipe                forget the cluster's data (each host's HDFS blocks, the NameNode's
#                                              namespace, logs, YARN state) so the next `up` formats a new HDFS;
#                                              refused while the cluster is up. Without it `up` keeps the data, and
#                                              an HDFS written by more worker hosts than come up re-replicates the
#                                              missing hosts' blocks over the links (the tests start from a wipe)
#   infra/cluster/netns.sh status              hosts, addresses, daemons, link rates, CPU quotas, live DataNodes
#                                              and NodeManagers, round-trip time master → each worker; exit 0
#                                              when everything runs, 3 otherwise
#   infra/cluster/netns.sh env                 export lines for clients on this (the host's) side:
#                                              HADOOP_CONF_DIR, CLOUDBURST_HDFS_URI, CLOUDBURST_WEBHDFS_PORT, ...,
#                                              Airflow's webhdfs_default connection
#   infra/cluster/netns.sh spark-archive       put pyspark's jars on the cluster's HDFS once (spark.yarn.archive;
#                                              `env` then exports CLOUDBURST_SPARK_YARN_ARCHIVE)
#   infra/cluster/netns.sh exec HOST CMD...    run CMD inside a host's namespace and CPU share (e.g. to kill its
#                                              daemons, or to measure what one host computes alone)
#
# Addresses: the bridge cb0 holds 10.77.0.1 on this side (Airflow, MLflow, Spark drivers reach the cluster
# through it); cb-master is 10.77.0.10, cb-node<i> 10.77.0.<10+i>. Each host has its own namespace, address,
# hostname (a UTS namespace per daemon) and /etc/hosts (ip netns exec bind-mounts /etc/netns/<host>/hosts).
# Compute: each worker host's processes (its daemons and every YARN container they start) share one cgroup with
# a CPU quota of CORES / NODES cores (cpu.cfs_quota_us), so a node owns a share the others cannot take; YARN is
# told CLOUDBURST_CLUSTER_VCORES vcores (default 2: a scheduling unit, one per worker process) and
# CLOUDBURST_CLUSTER_MEMORY_MB per node (default 4096).
# State: var/cluster/<host>/{conf,data,logs,pids,tmp,yarn}, var/cluster/client/conf, var/cluster/cluster.env.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
TEMPLATES="$ROOT/infra/hadoop/conf"
VAR="$ROOT/var/cluster"
STATE="$VAR/cluster.env"
PREFIX=cb
# The bridge on this side and each host's interface share one name: Horovod on Spark takes the rendezvous
# address of the driver (this side) from the interface name the tasks have in common.
BRIDGE=cb0
SUBNET=10.77.0
HOST_SIDE="$SUBNET.1"
MASTER_ADDRESS="$SUBNET.10"
CGROUP_ROOT=/sys/fs/cgroup/cpu
START_TIMEOUT="${CLOUDBURST_CLUSTER_START_TIMEOUT:-180}"
STOP_GRACE=30
MAX_NODES=8
# The single-node cluster's default ports (infra/hadoop/hadoop.sh): every host has its own address, so they
# never collide with each other nor with a single-node cluster on 127.0.0.1.
declare -A PORT=(
    [HDFS_PORT]=8020 [WEBHDFS_PORT]=9870 [NAMENODE_HTTPS_PORT]=9871 [SECONDARY_HTTP_PORT]=9868
    [BACKUP_PORT]=50100 [BACKUP_HTTP_PORT]=50105 [DATANODE_PORT]=9866 [DATANODE_HTTP_PORT]=9864
    [DATANODE_IPC_PORT]=9867 [DATANODE_HTTPS_PORT]=9865 [RM_PORT]=8032 [RM_SCHEDULER_PORT]=8030
    [RM_TRACKER_PORT]=8031 [RM_ADMIN_PORT]=8033 [RM_WEB_PORT]=8088 [RM_WEB_HTTPS_PORT]=8090 [NM_PORT]=8041
    [NM_LOCALIZER_PORT]=8040 [NM_WEB_PORT]=8042 [NM_WEB_HTTPS_PORT]=8044 [NM_COLLECTOR_PORT]=8048
    [NM_AMRMPROXY_PORT]=8049
)

die() { echo "netns.sh: $*" >&2; exit 1; }

host_address() {   # cb-master -> 10.77.0.10, cb-node3 -> 10.77.0.13
    case "$1" in
        "$PREFIX-master") echo "$MASTER_ADDRESS" ;;
        "$PREFIX"-node*) echo "$SUBNET.$((10 + ${1#"$PREFIX"-node}))" ;;
        *) return 1 ;;
    esac
}
worker_hosts() { local i; for ((i = 1; i <= $1; i++)); do echo "$PREFIX-node$i"; done; }
daemons_of() { if [[ "$1" == "$PREFIX-master" ]]; then echo namenode resourcemanager; else echo datanode nodemanager; fi; }
# shellcheck source=infra/hadoop/daemons.sh
source "$ROOT/infra/hadoop/daemons.sh"
daemon_heap() { case "$1" in namenode) echo 384m ;; resourcemanager) echo 512m ;; nodemanager) echo 384m ;; *) echo 256m ;; esac; }

# A link rate tc understands and a burst for it: 10 ms worth of bytes (at least 32 KiB), so tbf never starves
# a fast link for want of tokens between timer ticks.
check_link() {
    [[ "$1" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || die "LINK=$1: give a rate such as 100mbit, 1gbit or 10gbit"
    local number="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}" bits
    case "$unit" in kbit) bits=$((number * 1000)) ;; mbit) bits=$((number * 1000000)) ;; gbit) bits=$((number * 1000000000)) ;; esac
    ((bits >= 1000000 && bits <= 100000000000)) || die "LINK=$1: between 1mbit and 100gbit"
    LINK_BURST=$((bits / 8 / 100))
    ((LINK_BURST >= 32768)) || LINK_BURST=32768
}

require_tools() {
    [[ "$(id -u)" == 0 ]] || die "network namespaces need root (run as root)"
    local tool
    for tool in ip tc unshare curl; do command -v "$tool" >/dev/null || die "$tool is missing (make setup installs iproute2)"; done
}

# ------------------------------------------------------------------------------------------------ network

# Both ends of a host's veth pair at LINK (check_link sets LINK_BURST first); tc replaces a running qdisc in place.
shape_host_link() {
    tc qdisc replace dev "v-$1" root tbf rate "$2" burst "$LINK_BURST" latency 50ms
    ip netns exec "$1" tc qdisc replace dev "$BRIDGE" root tbf rate "$2" burst "$LINK_BURST" latency 50ms
}

# One namespace per host, a veth pair from it to the bridge, both ends shaped (tbf shapes egress: the bridge
# end shapes traffic into the host, the host end traffic out of it).
make_network() {
    local nodes="$1" link="$2" host address outside
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
        ip addr add "$HOST_SIDE/24" dev "$BRIDGE"
    fi
    ip link set "$BRIDGE" up
    for host in "$PREFIX-master" $(worker_hosts "$nodes"); do
        address="$(host_address "$host")"
        outside="v-$host"
        ip netns list | grep -qx "$host\( .*\)\?" || ip netns add "$host"
        if ! ip link show "$outside" >/dev/null 2>&1; then
            ip link add "$outside" type veth peer name "$BRIDGE" netns "$host"
            ip link set "$outside" master "$BRIDGE" up
            ip -n "$host" addr add "$address/24" dev "$BRIDGE"
        fi
        ip -n "$host" link set lo up
        ip -n "$host" link set "$BRIDGE" up
        shape_host_link "$host" "$link"
        mkdir -p "/etc/netns/$host"
        write_hosts_file "$nodes" >"/etc/netns/$host/hosts"
    done
}

write_hosts_file() {
    local host
    echo "127.0.0.1 localhost"
    echo "$HOST_SIDE $PREFIX-host"
    for host in "$PREFIX-master" $(worker_hosts "$1"); do echo "$(host_address "$host") $host"; done
}

remove_network() {
    local host
    for host in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(master|node[0-9]+)$" || true); do
        ip netns del "$host" 2>/dev/null || true
        rm -rf "/etc/netns/$host"
    done
    for host in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^v-$PREFIX-" || true); do
        ip link del "$host" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
}

# ------------------------------------------------------------------------------------------------ cgroups

cgroup_of() { echo "$CGROUP_ROOT/cloudburst-$1"; }

# CORES / NODES cores for each worker host (the master's daemons are not capped: they only coordinate).
make_cgroups() {
    local nodes="$1" cores quota host group
    CGROUPS=on
    if [[ ! -w "$CGROUP_ROOT/cgroup.procs" ]]; then
        echo "warning: $CGROUP_ROOT is not writable: worker hosts share the CPUs without quotas" >&2
        CGROUPS=off
        return 0
    fi
    cores="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # nproc obeys OpenMP's variables, set by training
    quota=$((cores * 100000 / nodes))
    for host in $(worker_hosts "$nodes"); do
        group="$(cgroup_of "$host")"
        mkdir -p "$group"
        echo 100000 >"$group/cpu.cfs_period_us"
        echo "$quota" >"$group/cpu.cfs_quota_us"
    done
}

remove_cgroups() {
    local group pid
    for group in "$CGROUP_ROOT"/cloudburst-"$PREFIX"-*; do
        [[ -d "$group" ]] || continue
        for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do echo "$pid" >"$CGROUP_ROOT/cgroup.procs" 2>/dev/null || true; done
        rmdir "$group" 2>/dev/null || true
    done
}

# ------------------------------------------------------------------------------------------------ config

# infra/hadoop/conf/*.template rendered for one host: the single-node templates put every address on 127.0.0.1;
# here a DataNode's or NodeManager's own addresses become the host's, every other (NameNode, ResourceManager,
# fs.defaultFS) the master's. Replication 2 (1 with one worker).
render_config() {
    local host="$1" nodes="$2" address dir template out sed_args=() name replication
    address="$(host_address "$host" 2>/dev/null || echo "$HOST_SIDE")"
    dir="$VAR/$host"
    mkdir -p "$dir/conf" "$dir/data" "$dir/logs" "$dir/pids" "$dir/tmp" "$dir/yarn/local"
    for name in "${!PORT[@]}"; do sed_args+=(-e "s|@@$name@@|${PORT[$name]}|g"); done
    replication=2
    ((nodes >= 2)) || replication=1
    sed_args+=(-e "s|@@VAR_DIR@@|$dir|g" -e "s|@@DATA_DIR@@|$dir/data|g" -e "s|@@USER@@|$(id -un)|g"
               -e "s|@@NM_MEMORY_MB@@|${CLOUDBURST_CLUSTER_MEMORY_MB:-4096}|g"
               -e "s|@@NM_VCORES@@|${CLOUDBURST_CLUSTER_VCORES:-2}|g"
               -e "/dfs\.datanode\.\|yarn\.nodemanager\./s|127\.0\.0\.1|$address|g"
               -e "s|127\.0\.0\.1|$MASTER_ADDRESS|g"
               -e "s|<name>dfs.replication</name><value>1</value>|<name>dfs.replication</name><value>$replication</value>|")
    for template in "$TEMPLATES"/*.template; do
        out="$dir/conf/$(basename "$template" .template)"
        sed "${sed_args[@]}" "$template" >"$out.tmp"
        if grep -q '@@[A-Z_]*@@' "$out.tmp"; then die "unfilled placeholder in $out.tmp"; fi
        mv -f "$out.tmp" "$out"
    done
    # A stopped DataNode is declared dead after 2 × recheck + 10 × heartbeat: 50 s instead of Hadoop's 10.5 min,
    # so a lost host's blocks are read from their other replica within a minute.
    sed -i 's|</configuration>|  <property><name>dfs.namenode.heartbeat.recheck-interval</name><value>10000</value></property>\n</configuration>|' \
        "$dir/conf/hdfs-site.xml"
    # Until then an append (how WebHDFS clients write) whose pipeline meets the dead DataNode must go on with the
    # replica it has: with 2 replicas on 2 hosts there is no other DataNode to replace it with, and Hadoop's
    # default refuses the write. The NameNode re-replicates once the host is back.
    sed -i 's|</configuration>|  <property><name>dfs.client.block.write.replace-datanode-on-failure.best-effort</name><value>true</value></property>\n</configuration>|' \
        "$dir/conf/hdfs-site.xml"
    # Likewise a NodeManager silent for 45 s is lost (YARN's default: 10 min): the ResourceManager then reports
    # its containers to their applications, and Spark fails the tasks that ran there instead of waiting for them.
    # Longer than a 30 s link cut (a host behind it comes back), far shorter than a user would wait for a lost one.
    sed -i 's|</configuration>|  <property><name>yarn.nm.liveness-monitor.expiry-interval-ms</name><value>45000</value></property>\n</configuration>|' \
        "$dir/conf/yarn-site.xml"
}

# ------------------------------------------------------------------------------------------------ daemons

find_java_and_jars() {
    local java
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then java="$JAVA_HOME/bin/java"
    else java="$(readlink -f "$(command -v java)")" || die "no java on PATH (make setup installs Java 17)"; fi
    JAVA="$java"
    JAVA_HOME="$(cd "$(dirname "$java")/.." && pwd -P)"
    export JAVA_HOME
    HADOOP_DIST="$("$ROOT/infra/hadoop/resolve.sh" | tail -1)"
}

jvm_options() {   # host daemon -> JVM_OPTS
    local host="$1" daemon="$2"
    # shellcheck disable=SC2206
    JVM_OPTS=("-Xmx$(daemon_heap "$daemon")" $SMALL_CLUSTER_JAVA_OPTS -Djava.net.preferIPv4Stack=true
        -XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=ALL-UNNAMED
        --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED
        "-Dhadoop.log.dir=$VAR/$host/logs" "-Dyarn.log.dir=$VAR/$host/logs" "-Dhadoop.log.file=$daemon.log"
        "-Dhadoop.home.dir=$HADOOP_DIST" "-Dhadoop.id.str=$(id -un)"
        "-Dproc_$daemon" "-Dcloudburst.cluster=$ROOT" "-Dcloudburst.host=$host")
}

# The pid of a host's daemon, found by its command-line tags (survives a lost pid file and a crashed script).
daemon_pid() {
    local host="$1" daemon="$2" pid cmdline
    for pid in $(pgrep -f -- "-Dproc_$daemon -Dcloudburst.cluster=$ROOT -Dcloudburst.host=$host" 2>/dev/null); do
        cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || continue
        [[ "$cmdline" == *java* ]] && { echo "$pid"; return 0; }
    done
    return 1
}

format_namenode_once() {
    local dir="$VAR/$PREFIX-master"
    [[ -f "$dir/data/namenode/current/VERSION" ]] && return 0
    jvm_options "$PREFIX-master" namenode-format
    HADOOP_CONF_DIR="$dir/conf" timeout 120 "$JAVA" "${JVM_OPTS[@]}" -cp "$dir/conf:$HADOOP_DIST/resources:$HADOOP_DIST/lib/*" \
        org.apache.hadoop.hdfs.server.namenode.NameNode -format -nonInteractive -clusterid cloudburst-netns \
        >"$dir/logs/namenode-format.log" 2>&1 || { tail -n 30 "$dir/logs/namenode-format.log" >&2; die "formatting the NameNode failed"; }
}

# The daemon runs in the host's network namespace, in a UTS namespace of its own with the host's name, in the
# host's cgroup; its YARN containers inherit all three.
start_daemon() {
    local host="$1" daemon="$2" dir="$VAR/$1" pid
    jvm_options "$host" "$daemon"
    echo "=== $(date -Is) starting $daemon on $host" >>"$dir/logs/$daemon.log"
    (
        cd "$dir"
        if [[ "$CGROUPS" == on && "$host" != "$PREFIX-master" ]]; then echo "$BASHPID" >"$(cgroup_of "$host")/cgroup.procs"; fi
        HADOOP_CONF_DIR="$dir/conf" JAVA_HOME="$JAVA_HOME" exec nohup setsid ip netns exec "$host" \
            unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" \
            "$JAVA" "${JVM_OPTS[@]}" -cp "$dir/conf:$HADOOP_DIST/resources:$HADOOP_DIST/lib/*" "$(main_class "$daemon")" \
            >>"$dir/logs/$daemon.log" 2>&1 </dev/null
    ) &
    echo "started $daemon on $host ($(host_address "$host"))"
}

stop_host_daemons() {
    local host="$1" daemon pid waited
    for daemon in nodemanager resourcemanager datanode namenode; do
        pid="$(daemon_pid "$host" "$daemon")" || continue
        kill -TERM "$pid" 2>/dev/null || true
        waited=0
        while kill -0 "$pid" 2>/dev/null && ((waited < STOP_GRACE * 10)); do sleep 0.1; waited=$((waited + 1)); done
        kill -KILL "$pid" 2>/dev/null || true
        echo "stopped $daemon on $host (pid $pid)"
    done
}

# ------------------------------------------------------------------------------------------------ health

namenode_url() { echo "http://$MASTER_ADDRESS:${PORT[WEBHDFS_PORT]}"; }
rm_url() { echo "http://$MASTER_ADDRESS:${PORT[RM_WEB_PORT]}"; }

live_datanodes() {
    curl -fsS --max-time 3 "$(namenode_url)/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState" 2>/dev/null \
        | grep -o '"NumLiveDataNodes" *: *[0-9]*' | grep -o '[0-9]*$'
}
hdfs_operational() {
    curl -fsS --max-time 3 "$(namenode_url)/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState" 2>/dev/null \
        | grep -q '"FSState" *: *"Operational"'
}
running_nodemanagers() {
    local json
    json="$(curl -fsS --max-time 3 -H 'Accept: application/json' "$(rm_url)/ws/v1/cluster/nodes?states=RUNNING" 2>/dev/null)" || return 1
    { grep -o '"state" *: *"RUNNING"' <<<"$json" || true; } | wc -l
}

# A daemon counts as exited when two checks a second apart both miss it: between its launch and the JVM, its
# process execs five times (nohup, setsid, ip netns exec, unshare, sh), and a single look at /proc can fall between
# two of them (a first `make test` on a loaded fresh machine reported a NameNode that went on to start).
wait_until_usable() {
    local nodes="$1" start=$SECONDS host daemon
    local -A missed=()
    printf 'Waiting (up to %s s) for %s live DataNodes and %s RUNNING NodeManagers ' "$START_TIMEOUT" "$nodes" "$nodes"
    while true; do
        for host in "$PREFIX-master" $(worker_hosts "$nodes"); do
            for daemon in $(daemons_of "$host"); do
                if daemon_pid "$host" "$daemon" >/dev/null; then
                    missed[$host-$daemon]=0
                elif ((${missed[$host-$daemon]:-0} >= 1)); then
                    echo >&2; tail -n 30 "$VAR/$host/logs/$daemon.log" >&2; die "$daemon on $host exited while starting"
                else
                    missed[$host-$daemon]=1
                fi
            done
        done
        if hdfs_operational && [[ "$(live_datanodes || echo 0)" -ge "$nodes" && "$(running_nodemanagers || echo 0)" -ge "$nodes" ]]; then
            echo " ready after $((SECONDS - start)) s"
            return 0
        fi
        ((SECONDS - start < START_TIMEOUT)) || { echo >&2; die "not usable after $START_TIMEOUT s: $(live_datanodes || echo 0) live DataNodes, $(running_nodemanagers || echo 0) RUNNING NodeManagers (logs: var/cluster/<host>/logs)"; }
        printf '.'
        sleep 1
    done
}

# ------------------------------------------------------------------------------------------------ commands

cmd_up() {
    local nodes="${1:-${NODES:-3}}" link="${2:-${LINK:-1gbit}}" host daemon started
    [[ "$nodes" =~ ^[0-9]+$ ]] && ((nodes >= 1 && nodes <= MAX_NODES)) || die "NODES=$nodes: a whole number from 1 to $MAX_NODES"
    check_link "$link"
    require_tools
    if [[ -f "$STATE" ]]; then
        local running_nodes running_link
        running_nodes="$(sed -n 's/^NODES=//p' "$STATE")" running_link="$(sed -n 's/^LINK=//p' "$STATE")"
        if ip netns list | grep -q "^$PREFIX-master" && [[ "$running_nodes" != "$nodes" ]]; then
            die "a cluster of $running_nodes worker hosts is up; make cluster-down first to change NODES"
        fi
        [[ "$running_link" == "$link" ]] || echo "re-shaping the links from $running_link to $link"
    fi
    started=$SECONDS
    find_java_and_jars
    make_network "$nodes" "$link"
    make_cgroups "$nodes"
    for host in "$PREFIX-master" $(worker_hosts "$nodes") client; do render_config "$host" "$nodes"; done
    format_namenode_once
    for host in "$PREFIX-master" $(worker_hosts "$nodes"); do
        for daemon in $(daemons_of "$host"); do
            daemon_pid "$host" "$daemon" >/dev/null || start_daemon "$host" "$daemon"
        done
    done
    printf 'NODES=%s\nLINK=%s\nCGROUPS=%s\nMASTER=%s\n' "$nodes" "$link" "$CGROUPS" "$MASTER_ADDRESS" >"$STATE"
    wait_until_usable "$nodes"
    echo "Cluster up in $((SECONDS - started)) s: master $MASTER_ADDRESS, $nodes worker hosts, links $link."
    echo "  HDFS  hdfs://$MASTER_ADDRESS:${PORT[HDFS_PORT]}   $(namenode_url)"
    echo "  YARN  $(rm_url)"
    echo "  clients on this side: eval \"\$(infra/cluster/netns.sh env)\""
}

# Re-shape a running cluster's links (a scaling study's link profiles): daemons, data and running jobs stay.
cmd_shape() {
    local link="${1:?LINK, e.g. 100mbit}" nodes running host started=$SECONDS
    check_link "$link"
    require_tools
    [[ -f "$STATE" ]] && ip netns list | grep -q "^$PREFIX-master" || die "no cluster is up (make cluster-up)"
    nodes="$(sed -n 's/^NODES=//p' "$STATE")" running="$(sed -n 's/^LINK=//p' "$STATE")"
    for host in "$PREFIX-master" $(worker_hosts "$nodes"); do shape_host_link "$host" "$link"; done
    sed -i "s/^LINK=.*/LINK=$link/" "$STATE"
    echo "links shaped to $link (were $running) on the master and $nodes worker hosts in $((SECONDS - started)) s"
}

cmd_wipe() {
    ip netns list | grep -q "^$PREFIX-" && die "the cluster is up; take it down first ($0 down)"
    pgrep -f -- "-Dcloudburst.cluster=$ROOT" >/dev/null && die "cluster daemons still run; take it down first ($0 down)"
    local freed=0
    # A fresh checkout has no var/cluster: nothing to free, and du's failure must not end the script (pipefail).
    if [[ -d "$VAR" ]]; then freed="$(du -sh "$VAR" | cut -f1)"; fi
    rm -rf "${VAR:?}/$PREFIX"-* "$VAR/client" "$STATE" "$VAR/spark-archive.uri"
    echo "Cluster data wiped ($freed in var/cluster); the next up formats a new HDFS."
}

cmd_down() {
    local host started=$SECONDS
    # Worker hosts first and side by side (a NodeManager may take ~17 s to stop), then the master.
    for host in $(pgrep -af -- "-Dcloudburst.cluster=$ROOT" 2>/dev/null | grep -o -- "-Dcloudburst.host=[^ ]*" | cut -d= -f2 | sort -u); do
        [[ "$host" == "$PREFIX-master" ]] || stop_host_daemons "$host" &
    done
    wait
    stop_host_daemons "$PREFIX-master"
    remove_cgroups
    remove_network
    rm -f "$STATE" "$VAR/spark-archive.uri"
    echo "Cluster down in $((SECONDS - started)) s (namespaces, links, bridge, cgroups removed; data kept in var/cluster)."
}

cmd_status() {
    local nodes link host daemon pid ok=0 rate quota rtt
    if [[ ! -f "$STATE" ]]; then echo "no cluster (infra/cluster/netns.sh up)"; return 3; fi
    nodes="$(sed -n 's/^NODES=//p' "$STATE")" link="$(sed -n 's/^LINK=//p' "$STATE")"
    echo "cluster: master + $nodes worker hosts, links $link"
    for host in "$PREFIX-master" $(worker_hosts "$nodes"); do
        rate="$(tc qdisc show dev "v-$host" 2>/dev/null | grep -o 'rate [^ ]*' | head -1 || true)"
        quota="uncapped"
        [[ -r "$(cgroup_of "$host")/cpu.cfs_quota_us" ]] && quota="cpu quota $(awk '{printf "%.2f cores", $1 / 100000}' "$(cgroup_of "$host")/cpu.cfs_quota_us")"
        rtt=""
        if [[ "$host" != "$PREFIX-master" ]]; then
            rtt="$(ip netns exec "$PREFIX-master" python3 - "$(host_address "$host")" 2>/dev/null <<'EOF' || true
import socket, sys, time
best = None
for _ in range(5):
    started = time.perf_counter()
    try:
        socket.create_connection((sys.argv[1], 9866), timeout=2).close()
    except OSError:
        break
    elapsed = time.perf_counter() - started
    best = elapsed if best is None else min(best, elapsed)
print(f"tcp connect {best * 1e6:.0f} µs" if best is not None else "")
EOF
)"
        fi
        printf '%-10s %-11s %-14s %-22s %s\n' "$host" "$(host_address "$host")" "${rate:-unshaped}" "$quota" "$rtt"
        for daemon in $(daemons_of "$host"); do
            if pid="$(daemon_pid "$host" "$daemon")"; then printf '    %-16s running (pid %s)\n' "$daemon" "$pid"
            else printf '    %-16s NOT running\n' "$daemon"; ok=3; fi
        done
    done
    echo "HDFS: $(hdfs_operational && echo operational || echo 'not operational'), $(live_datanodes || echo 0) live DataNodes;" \
         "YARN: $(running_nodemanagers || echo 0) RUNNING NodeManagers"
    return "$ok"
}

cmd_env() {
    echo "export HADOOP_CONF_DIR='$VAR/client/conf'"
    echo "export CLOUDBURST_HDFS_URI='hdfs://$MASTER_ADDRESS:${PORT[HDFS_PORT]}'"
    echo "export CLOUDBURST_WEBHDFS_PORT='${PORT[WEBHDFS_PORT]}'"
    echo "export CLOUDBURST_YARN_WEB='$MASTER_ADDRESS:${PORT[RM_WEB_PORT]}'"
    echo "export CLOUDBURST_SPARK_DRIVER_HOST='$HOST_SIDE'"
    # The NameNode Airflow's HDFS sensors ask (infra/airflow-env.sh keeps one already set).
    echo "export AIRFLOW_CONN_WEBHDFS_DEFAULT='{\"conn_type\":\"webhdfs\",\"host\":\"$MASTER_ADDRESS\",\"port\":${PORT[WEBHDFS_PORT]}}'"
    echo "export CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS='$SMALL_CLUSTER_JAVA_OPTS'"
    [[ -f "$VAR/spark-archive.uri" ]] && echo "export CLOUDBURST_SPARK_YARN_ARCHIVE='$(<"$VAR/spark-archive.uri")'"
    return 0
}

# spark.yarn.archive for the cluster: pyspark's jars in one stored zip (infra/hadoop/hadoop.sh makes the same one
# under .cache/spark), put on the cluster's HDFS once, so YARN localizes it once per host instead of spark-submit
# uploading ~320 MB for every application.
cmd_spark_archive() {
    local python="$ROOT/.venv/training/bin/python" jars version zip name dest location status
    [[ -x "$python" ]] || die "no training environment (make setup-training)"
    read -r version jars < <("$python" -c 'import os, pyspark; print(pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
    name="spark-jars-$version.zip"
    zip="$ROOT/.cache/spark/$name"
    dest="/cloudburst-system/spark/$name"
    if [[ ! -f "$zip" ]]; then
        mkdir -p "$(dirname "$zip")"
        "$python" - "$jars" "$zip.tmp.$$" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as archive:
    for name in sorted(os.listdir(sys.argv[1])):
        if name.endswith(".jar"):
            archive.write(os.path.join(sys.argv[1], name), name)
PY
        mv -f "$zip.tmp.$$" "$zip"
    fi
    local webhdfs
    webhdfs="$(namenode_url)/webhdfs/v1"
    status="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$webhdfs$dest?op=GETFILESTATUS&user.name=root")" || status=000
    if [[ "$status" == 404 ]]; then
        echo "uploading ${zip#"$ROOT/"} ($(($(stat -c %s "$zip") / 1048576)) MB) to the cluster's HDFS ..."
        curl -fsS --max-time 10 -X PUT "$webhdfs/cloudburst-system/spark?op=MKDIRS&user.name=root" >/dev/null
        location="$(curl -fsS --max-time 10 -X PUT -o /dev/null -w '%{redirect_url}'             "$webhdfs$dest._COPYING_?op=CREATE&overwrite=true&user.name=root")"
        [[ -n "$location" ]] || die "WebHDFS CREATE gave no redirect"
        curl -fsS --max-time 600 -X PUT -T "$zip" -H 'Content-Type: application/octet-stream' "$location" >/dev/null
        curl -fsS --max-time 10 -X PUT "$webhdfs$dest._COPYING_?op=RENAME&destination=$dest&user.name=root" | grep -q true \
            || die "WebHDFS RENAME of the archive failed"
    elif [[ "$status" != 200 ]]; then
        die "WebHDFS GETFILESTATUS $dest answered HTTP $status (is the cluster up? $0 status)"
    fi
    echo "hdfs://$MASTER_ADDRESS:${PORT[HDFS_PORT]}$dest" >"$VAR/spark-archive.uri"
    echo "Spark archive on the cluster: $(<"$VAR/spark-archive.uri")"
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    shape) shift; cmd_shape "$@" ;;
    down) cmd_down ;;
    wipe) cmd_wipe ;;
    status) cmd_status ;;
    env) cmd_env ;;
    spark-archive) cmd_spark_archive ;;
    exec) shift
        (($# >= 2)) || die "exec needs a host and a command, e.g. exec $PREFIX-node1 nproc"
        host="$1"; shift
        up_hosts="$(ip netns list | grep -o "^$PREFIX-[a-z0-9]*" | sort | paste -sd' ' || true)"
        [[ " $up_hosts " == *" $host "* ]] || die "no host $host is up (hosts up: ${up_hosts:-none})"
        # Its CPU share too (worker hosts): a process run "on" a host competes for that host's cores only.
        if [[ -w "$(cgroup_of "$host")/cgroup.procs" ]]; then echo "$$" >"$(cgroup_of "$host")/cgroup.procs"; fi
        exec ip netns exec "$host" "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
