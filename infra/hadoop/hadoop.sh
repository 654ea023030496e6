#!/usr/bin/env bash
# A real single-node Apache Hadoop (HDFS + YARN) for this checkout: the jars pinned in infra/hadoop/pom.xml,
# four background JVMs, state under var/hadoop, every port on 127.0.0.1 only.
#   infra/hadoop/hadoop.sh up             resolve the jars if needed, render the config, format HDFS once, start
#                                         what is not running, wait until HDFS and YARN are usable, upload
#                                         Spark's jars for YARN (spark-archive); "already up" when all run
#   infra/hadoop/hadoop.sh down           SIGTERM, up to 30 s grace each, then SIGKILL; NodeManager first
#   infra/hadoop/hadoop.sh status         one line per daemon, HDFS safe mode, live DataNodes/NodeManagers;
#                                         exit 0 when all four run, 3 otherwise
#   infra/hadoop/hadoop.sh env            export lines for `eval "$(infra/hadoop/hadoop.sh env)"`: HADOOP_CONF_DIR,
#                                         CLOUDBURST_HDFS_URI, CLOUDBURST_WEBHDFS_PORT, CLOUDBURST_YARN_WEB
#                                         (host:port), CLOUDBURST_SPARK_YARN_ARCHIVE (once uploaded)
#   infra/hadoop/hadoop.sh spark-archive  zip pyspark's jars once and put them on HDFS for spark.yarn.archive
#   infra/hadoop/hadoop.sh dfsadmin ARGS  Hadoop's DFSAdmin (e.g. -safemode get|enter|leave, -report)
# Layout: var/hadoop/conf (HADOOP_CONF_DIR, rendered from infra/hadoop/conf/*.template), var/hadoop/data
# (NameNode and DataNode dirs), var/hadoop/logs/<daemon>.log (+ userlogs/ of YARN containers), var/hadoop/pids.
# Ports: the PORTS table below; each has an environment variable, read when the cluster starts from nothing
# (while any daemon runs, the ports it was started with, var/hadoop/conf/ports.env, stay in force).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
HERE="$ROOT/infra/hadoop"
VAR="$ROOT/var/hadoop"
CONF="$VAR/conf"
DATA="$VAR/data"
LOGS="$VAR/logs"
PIDS="$VAR/pids"
TRAINING_VENV="$ROOT/.venv/training"
DAEMONS=(namenode datanode resourcemanager nodemanager)
START_TIMEOUT="${CLOUDBURST_HADOOP_START_TIMEOUT:-120}"   # seconds until HDFS and YARN must be usable
declare -A LOG_OFFSET=()   # daemon -> size of its log before this run started it
STOP_GRACE=30   # seconds; the NodeManager alone may take ~17 s (see cmd_down)
SPARK_ARCHIVE_DIR=/cloudburst-system/spark

# name  environment variable  default  -- rendered as @@name@@ into the templates and into ports.env.
PORTS=(
    HDFS_PORT               CLOUDBURST_HDFS_PORT                8020   # NameNode RPC: fs.defaultFS
    WEBHDFS_PORT            CLOUDBURST_WEBHDFS_PORT             9870   # NameNode UI + WebHDFS
    NAMENODE_HTTPS_PORT     CLOUDBURST_NAMENODE_HTTPS_PORT      9871   # (configured, unused: HTTP only)
    SECONDARY_HTTP_PORT     CLOUDBURST_SECONDARY_HTTP_PORT      9868   # (no secondary NameNode is started)
    BACKUP_PORT             CLOUDBURST_BACKUP_PORT              50100  # (no backup NameNode is started)
    BACKUP_HTTP_PORT        CLOUDBURST_BACKUP_HTTP_PORT         50105
    DATANODE_PORT           CLOUDBURST_DATANODE_PORT            9866   # block transfer
    DATANODE_HTTP_PORT      CLOUDBURST_DATANODE_HTTP_PORT       9864   # DataNode UI + WebHDFS data
    DATANODE_IPC_PORT       CLOUDBURST_DATANODE_IPC_PORT        9867
    DATANODE_HTTPS_PORT     CLOUDBURST_DATANODE_HTTPS_PORT      9865   # (configured, unused)
    RM_PORT                 CLOUDBURST_YARN_RM_PORT             8032   # client RPC (spark-submit)
    RM_SCHEDULER_PORT       CLOUDBURST_YARN_SCHEDULER_PORT      8030   # ApplicationMasters
    RM_TRACKER_PORT         CLOUDBURST_YARN_TRACKER_PORT        8031   # NodeManager heartbeats
    RM_ADMIN_PORT           CLOUDBURST_YARN_ADMIN_PORT          8033
    RM_WEB_PORT             CLOUDBURST_YARN_WEB_PORT            8088   # ResourceManager UI + REST
    RM_WEB_HTTPS_PORT       CLOUDBURST_YARN_WEB_HTTPS_PORT      8090   # (configured, unused)
    NM_PORT                 CLOUDBURST_NM_PORT                  8041   # container manager (fixed: a restart keeps the node id)
    NM_LOCALIZER_PORT       CLOUDBURST_NM_LOCALIZER_PORT        8040
    NM_WEB_PORT             CLOUDBURST_NM_WEB_PORT              8042   # NodeManager UI, container logs
    NM_WEB_HTTPS_PORT       CLOUDBURST_NM_WEB_HTTPS_PORT        8044   # (configured, unused)
    NM_COLLECTOR_PORT       CLOUDBURST_NM_COLLECTOR_PORT        8048   # (timeline service v2 only: unused)
    NM_AMRMPROXY_PORT       CLOUDBURST_NM_AMRMPROXY_PORT        8049   # (AMRM proxy off: unused)
)
# Which ports a daemon binds (checked before it starts, so a port taken by something else is a clear error).
daemon_ports() {
    case "$1" in
        namenode) echo HDFS_PORT WEBHDFS_PORT ;;
        datanode) echo DATANODE_PORT DATANODE_HTTP_PORT DATANODE_IPC_PORT ;;
        resourcemanager) echo RM_PORT RM_SCHEDULER_PORT RM_TRACKER_PORT RM_ADMIN_PORT RM_WEB_PORT ;;
        nodemanager) echo NM_PORT NM_LOCALIZER_PORT NM_WEB_PORT ;;
    esac
}

# shellcheck source=infra/hadoop/daemons.sh
source "$HERE/daemons.sh"

# Heaps sized for a dev box: 1.5 GB of heap at most in all; measured ~1.2 GB RSS for the four after Spark jobs.
# CLOUDBURST_<DAEMON>_HEAP (e.g. CLOUDBURST_NAMENODE_HEAP=1g) overrides one.
daemon_heap() {
    local var default
    var="CLOUDBURST_$(tr '[:lower:]' '[:upper:]' <<<"$1")_HEAP"
    case "$1" in
        namenode) default=384m ;;
        datanode) default=256m ;;
        resourcemanager) default=512m ;;
        nodemanager) default=384m ;;
    esac
    echo "${!var:-$default}"
}

# ------------------------------------------------------------------------------------------------ processes

pid_file() { echo "$PIDS/$1.pid"; }

# Whether pid $2 is daemon $1 started by this script for this checkout (its command-line tags, which also guard
# against a recycled pid).
is_our_daemon() {
    local cmdline
    cmdline="$(tr '\0' '\n' <"/proc/$2/cmdline" 2>/dev/null)" || return 1
    grep -qx -- "-Dproc_$1" <<<"$cmdline" && grep -qxF -- "-Dcloudburst.root=$ROOT" <<<"$cmdline"
}

# The daemon's pid, or nothing. The pid file first; without a (valid) one, a search by command-line tags, so a
# daemon whose pid file was lost (`make clean` removes var/) is still found, stopped, and not started twice.
running_pid() {
    local file pid
    file="$(pid_file "$1")"
    if [[ -f "$file" ]]; then
        pid="$(<"$file")"
        if [[ "$pid" =~ ^[0-9]+$ ]] && is_our_daemon "$1" "$pid"; then
            echo "$pid"
            return 0
        fi
        rm -f "$file"
    fi
    for pid in $(pgrep -f -- "-Dproc_$1 -Dcloudburst.root=" 2>/dev/null); do
        if is_our_daemon "$1" "$pid"; then
            mkdir -p "$PIDS" && echo "$pid" >"$file"
            echo "$pid"
            return 0
        fi
    done
    return 1
}

any_running() {
    local d
    for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null && return 0; done
    return 1
}

# Port values: from var/hadoop/conf/ports.env while any daemon runs (what they were started with), else from
# the environment / defaults.
load_ports() {
    local i name var default
    if any_running && [[ -f "$CONF/ports.env" ]]; then
        # shellcheck disable=SC1091
        source "$CONF/ports.env"
        PORTS_FROM="$CONF/ports.env"
    else
        for ((i = 0; i < ${#PORTS[@]}; i += 3)); do
            name="${PORTS[i]}" var="${PORTS[i + 1]}" default="${PORTS[i + 2]}"
            printf -v "$name" '%s' "${!var:-$default}"
            if ! [[ "${!name}" =~ ^[0-9]+$ ]] || ((${!name} < 1 || ${!name} > 65535)); then
                echo "hadoop.sh: $var=${!name} is not a port number" >&2
                exit 2
            fi
        done
        PORTS_FROM=environment
    fi
    NM_MEMORY_MB="${CLOUDBURST_YARN_MEMORY_MB:-12288}"
    NM_VCORES="${CLOUDBURST_YARN_VCORES:-8}"
    HDFS_URI="hdfs://127.0.0.1:$HDFS_PORT"
    NAMENODE_URL="http://127.0.0.1:$WEBHDFS_PORT"
    RM_URL="http://127.0.0.1:$RM_WEB_PORT"
}

# Something (not one of our daemons) answers on 127.0.0.1:$1.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ----------------------------------------------------------------------------------------- java and jars

find_java() {
    local java version
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        java="$JAVA_HOME/bin/java"
    elif java="$(command -v java)"; then
        java="$(readlink -f "$java")"
    else
        echo "hadoop.sh: no java on PATH and no JAVA_HOME; Hadoop 3.5 needs Java 17 (apt-get install openjdk-17-jdk-headless)" >&2
        exit 1
    fi
    JAVA="$java"
    JAVA_HOME="$(cd "$(dirname "$java")/.." && pwd -P)"
    # The release file costs nothing to read; `java -version` is the fallback.
    version="$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$JAVA_HOME/release" 2>/dev/null || true)"
    [[ -n "$version" ]] || version="$("$JAVA" -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p')"
    if [[ -z "$version" ]] || ((version < 17)); then
        echo "hadoop.sh: $JAVA is Java ${version:-?}; Hadoop 3.5 needs Java 17 or newer (set JAVA_HOME)" >&2
        exit 1
    fi
    export JAVA_HOME
}

resolve_jars() {
    HADOOP_DIST="$("$HERE/resolve.sh" | tail -1)"
    CLASSPATH_="$CONF:$HADOOP_DIST/resources:$HADOOP_DIST/lib/*"
    HADOOP_VERSION="$(basename "$HADOOP_DIST")"
    HADOOP_VERSION="${HADOOP_VERSION%%-*}"
}

# JVM options every daemon (and the one-off `NameNode -format`) gets (the two JIT/GC flags are SMALL_CLUSTER_JAVA_OPTS,
# infra/hadoop/daemons.sh, which Spark's containers get too):
#  -Xmx<heap>                        see daemon_heap.
#  -XX:+UseSerialGC                  small heaps on a 2-core box: no parallel GC threads, lowest footprint.
#  -XX:TieredStopAtLevel=1           C1 JIT only: four JVMs starting at once on 2 cores spend most of their time
#                                    compiling; this halved `up` (13-14 s -> 7-9 s until usable, measured) and
#                                    trims RSS. A dev cluster's daemons are I/O-bound, so C2's peak speed is not
#                                    missed; CLOUDBURST_HADOOP_JAVA_OPTS=-XX:TieredStopAtLevel=4 restores it.
#  -Djava.net.preferIPv4Stack=true   what Hadoop's own launcher passes: IPv4 sockets only, matching 127.0.0.1.
#  JPMS_OPTS                         see below.
#  -Dhadoop.log.dir / -Dyarn.log.dir where the daemons (and the NodeManager's defaults) put logs.
#  -Dhadoop.home.dir                 silences "HADOOP_HOME and hadoop.home.dir are unset" (nothing reads it).
#  -Dproc_<daemon> -Dcloudburst.root tags on the command line, so running_pid() knows the process is ours.
#  $CLOUDBURST_HADOOP_JAVA_OPTS      anything extra (word-split), e.g. a debugger agent.
# Java 17 module access (JPMS). On this checkout's paths (start-up, NameNode/DataNode/RM/NM web UIs and REST,
# WebHDFS, Spark containers) Hadoop 3.5.0 on Java 17 needed none of them; they are the list Hadoop 3.5.0 itself
# runs its JVMs with on Java 17+ (hadoop-project-3.5.0.pom, <extraJavaTestArgs>, which HADOOP-19310 also put
# into Hadoop's launcher scripts), kept so that paths not exercised here (Kerberos/SSL: sun.security.*,
# codecs: java.util.zip, ...) behave as under Hadoop's own scripts.
JPMS_OPTS=(
    -XX:+IgnoreUnrecognizedVMOptions
    --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens=java.base/java.math=ALL-UNNAMED
    --add-opens=java.base/java.net=ALL-UNNAMED
    --add-opens=java.base/java.text=ALL-UNNAMED
    --add-opens=java.base/java.util=ALL-UNNAMED
    --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
    --add-opens=java.base/java.util.zip=ALL-UNNAMED
    --add-opens=java.base/sun.security.util=ALL-UNNAMED
    --add-opens=java.base/sun.security.x509=ALL-UNNAMED
    --enable-native-access=ALL-UNNAMED
)
# Sets JVM_OPTS for one daemon (an array: paths may contain spaces).
set_jvm_opts() {
    local daemon="$1" heap="$2"
    # shellcheck disable=SC2206
    JVM_OPTS=("-Xmx$heap" $SMALL_CLUSTER_JAVA_OPTS -Djava.net.preferIPv4Stack=true "${JPMS_OPTS[@]}"
        "-Dhadoop.log.dir=$LOGS" "-Dyarn.log.dir=$LOGS" "-Dhadoop.log.file=$daemon.log"
        "-Dhadoop.home.dir=$HADOOP_DIST" "-Dhadoop.id.str=$(id -un)"
        "-Dproc_$daemon" "-Dcloudburst.root=$ROOT")
    # shellcheck disable=SC2206
    [[ -n "${CLOUDBURST_HADOOP_JAVA_OPTS:-}" ]] && JVM_OPTS+=($CLOUDBURST_HADOOP_JAVA_OPTS)
    return 0
}

# ---------------------------------------------------------------------------------------------- config

# infra/hadoop/conf/*.template -> var/hadoop/conf/*, plus ports.env. Only while no daemon runs: a running
# cluster keeps the config it was started with.
render_config() {
    local i name template out sed_args=() tmp
    mkdir -p "$CONF" "$DATA" "$LOGS" "$PIDS" "$VAR/tmp" "$VAR/yarn/local"
    for ((i = 0; i < ${#PORTS[@]}; i += 3)); do
        name="${PORTS[i]}"
        sed_args+=(-e "s|@@$name@@|${!name}|g")
    done
    sed_args+=(-e "s|@@VAR_DIR@@|$VAR|g" -e "s|@@DATA_DIR@@|$DATA|g" -e "s|@@USER@@|$(id -un)|g"
               -e "s|@@NM_MEMORY_MB@@|$NM_MEMORY_MB|g" -e "s|@@NM_VCORES@@|$NM_VCORES|g")
    for template in "$HERE"/conf/*.template; do
        out="$CONF/$(basename "$template" .template)"
        tmp="$out.tmp.$$"
        sed "${sed_args[@]}" "$template" >"$tmp"
        if grep -q '@@[A-Z_]*@@' "$tmp"; then
            echo "hadoop.sh: unfilled placeholder in $tmp: $(grep -o '@@[A-Z_]*@@' "$tmp" | head -1)" >&2
            exit 1
        fi
        mv -f "$tmp" "$out"
    done
    {
        echo "# Ports the running Hadoop daemons were started with (written by infra/hadoop/hadoop.sh up)."
        for ((i = 0; i < ${#PORTS[@]}; i += 3)); do echo "${PORTS[i]}=${!PORTS[i]}"; done
    } >"$CONF/ports.env"
}

# ---------------------------------------------------------------------------------------------- daemons

# Format HDFS once: a NameNode dir with current/VERSION is formatted. A fresh namespace also gets a fresh
# DataNode dir (old blocks would belong to another cluster id and the DataNode would refuse to start).
format_namenode_once() {
    [[ -f "$DATA/namenode/current/VERSION" ]] && return 0
    echo "Formatting HDFS (first start) in ${DATA#"$ROOT/"} ..."
    rm -rf "$DATA/namenode" "$DATA/datanode"
    set_jvm_opts namenode-format 256m
    if ! HADOOP_CONF_DIR="$CONF" timeout 120 "$JAVA" "${JVM_OPTS[@]}" -cp "$CLASSPATH_" \
            org.apache.hadoop.hdfs.server.namenode.NameNode -format -nonInteractive -clusterid cloudburst \
            >"$LOGS/namenode-format.log" 2>&1; then
        echo "hadoop.sh: formatting the NameNode failed; last lines of $LOGS/namenode-format.log:" >&2
        tail -n 30 "$LOGS/namenode-format.log" >&2
        exit 1
    fi
}

# Before starting anything: every port of the daemons about to start must be free (a port taken by some other
# program, say a docker-compose NameNode on 9870, is a clear error instead of a daemon dying in its log).
check_ports_free() {
    local daemon name port i var
    for daemon in "$@"; do
        for name in $(daemon_ports "$daemon"); do
            port="${!name}"
            port_taken "$port" || continue
            for ((i = 0; i < ${#PORTS[@]}; i += 3)); do [[ "${PORTS[i]}" == "$name" ]] && var="${PORTS[i + 1]}"; done
            echo "hadoop.sh: cannot start $daemon: 127.0.0.1:$port is taken by another process" \
                 "(see: ss -ltnp | grep :$port); stop it, or set $var to a free port while the cluster is down." \
                 "The compose stack (docker-compose.yaml) publishes 8020/9870/9864/9866 too." >&2
            exit 1
        done
    done
}

start_daemon() {
    local daemon="$1" log pid
    log="$LOGS/$daemon.log"
    set_jvm_opts "$daemon" "$(daemon_heap "$daemon")"
    LOG_OFFSET[$daemon]="$(stat -c %s "$log" 2>/dev/null || echo 0)"
    echo "=== $(date -Is) starting $daemon" >>"$log"
    # setsid: own session, so the daemon outlives this script and the terminal; nohup: ignores SIGHUP. As in
    # airflow-services.sh, the background child is no group leader, so setsid execs in place and $! is the
    # JVM's pid. HADOOP_CONF_DIR and JAVA_HOME in the environment are inherited by YARN containers
    # (yarn.nodemanager.env-whitelist): Spark's AM and executors run $JAVA_HOME/bin/java.
    (
        cd "$VAR"
        HADOOP_CONF_DIR="$CONF" JAVA_HOME="$JAVA_HOME" exec nohup setsid "$JAVA" "${JVM_OPTS[@]}" \
            -cp "$CLASSPATH_" "$(main_class "$daemon")" >>"$log" 2>&1 </dev/null
    ) &
    pid=$!
    echo "$pid" >"$(pid_file "$daemon")"
    echo "started $daemon (pid $pid, log ${log#"$ROOT/"})"
}

stop_daemon() {
    local daemon="$1" pid waited=0
    if ! pid="$(running_pid "$daemon")"; then
        echo "$daemon: not running"
        rm -f "$(pid_file "$daemon")"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && ((waited < STOP_GRACE * 10)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$daemon (pid $pid) ignored SIGTERM for ${STOP_GRACE} s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    rm -f "$(pid_file "$daemon")"
    echo "$daemon: stopped (was pid $pid)"
}

# ------------------------------------------------------------------------------------------ health checks

# NameNode JMX: "FSState" is "Operational" out of safe mode ("safeMode" in it); NumLiveDataNodes counts
# registered DataNodes. Prints "<state> <live datanodes>", nothing when the NameNode does not answer.
hdfs_health() {
    local json state live
    json="$(curl -fsS --max-time 3 "$NAMENODE_URL/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState" 2>/dev/null)" || return 1
    state="$(grep -o '"FSState" *: *"[A-Za-z]*"' <<<"$json" | sed 's/.*"\([A-Za-z]*\)"$/\1/')"
    live="$(grep -o '"NumLiveDataNodes" *: *[0-9]*' <<<"$json" | grep -o '[0-9]*$')"
    [[ -n "$state" && -n "$live" ]] || return 1
    echo "$state $live"
}

# ResourceManager REST: how many NodeManagers are RUNNING; nothing when the RM does not answer.
yarn_running_nodes() {
    local json
    json="$(curl -fsS --max-time 3 -H 'Accept: application/json' "$RM_URL/ws/v1/cluster/nodes?states=RUNNING" 2>/dev/null)" || return 1
    { grep -o '"state" *: *"RUNNING"' <<<"$json" || true; } | wc -l
}

# A DataNode or NodeManager started in this run has registered itself. Needed besides the NameNode's and the
# ResourceManager's counts: after a crash those still list the dead process as live for ~10 minutes.
started_daemon_ready() {
    case "$1" in
        datanode)   # its own JMX: the block-pool actor is RUNNING once registered with the NameNode
            curl -fsS --max-time 3 "http://127.0.0.1:$DATANODE_HTTP_PORT/jmx?qry=Hadoop:service=DataNode,name=DataNodeInfo" \
                2>/dev/null | grep -q 'ActorState\\*"*:\\*"*RUNNING' ;;
        nodemanager)   # no REST view of that; its log line since this start
            tail -c +"$((${LOG_OFFSET[nodemanager]:-0} + 1))" "$LOGS/nodemanager.log" 2>/dev/null \
                | grep -q "Registered with ResourceManager" ;;
        *) return 0 ;;
    esac
}

fail_with_log() {
    local daemon="$1" why="$2"
    echo >&2
    echo "hadoop.sh: $daemon $why; last lines of $LOGS/$daemon.log:" >&2
    tail -n 40 "$LOGS/$daemon.log" >&2
    exit 1
}

# $@: the daemons started in this run.
wait_until_usable() {
    local start=$SECONDS health="" nodes="" d unready
    printf 'Waiting (up to %s s) for HDFS to leave safe mode with a live DataNode and for a RUNNING NodeManager ' "$START_TIMEOUT"
    while true; do
        for d in "${DAEMONS[@]}"; do
            running_pid "$d" >/dev/null || fail_with_log "$d" "exited while starting"
        done
        health="$(hdfs_health || true)"
        nodes="$(yarn_running_nodes || true)"
        unready=""
        if [[ "$health" == Operational\ [1-9]* && "${nodes:-0}" -ge 1 ]]; then
            # Only now: the DataNode logs a stack trace for each JMX query before it has registered.
            for d in "$@"; do
                started_daemon_ready "$d" || { unready="$d"; break; }
            done
            if [[ -z "$unready" ]]; then
                echo " ready after $((SECONDS - start)) s"
                return 0
            fi
        fi
        if ((SECONDS - start >= START_TIMEOUT)); then
            if [[ "$unready" == datanode ]]; then fail_with_log datanode "did not register with the NameNode within $START_TIMEOUT s"
            elif [[ "$unready" == nodemanager ]]; then fail_with_log nodemanager "did not register with the ResourceManager within $START_TIMEOUT s"
            elif [[ -z "$health" ]]; then fail_with_log namenode "did not answer on $NAMENODE_URL/jmx within $START_TIMEOUT s"
            elif [[ "$health" != *\ [1-9]* ]]; then fail_with_log datanode "did not register with the NameNode within $START_TIMEOUT s"
            elif [[ "$health" != Operational* ]]; then fail_with_log namenode "is still in safe mode after $START_TIMEOUT s"
            elif [[ -z "$nodes" ]]; then fail_with_log resourcemanager "did not answer on $RM_URL/ws/v1/cluster/nodes within $START_TIMEOUT s"
            else fail_with_log nodemanager "is not RUNNING in the ResourceManager after $START_TIMEOUT s"
            fi
        fi
        printf '.'
        sleep 1
    done
}

print_endpoints() {
    echo "NameNode UI:          $NAMENODE_URL   (WebHDFS: $NAMENODE_URL/webhdfs/v1/)"
    echo "ResourceManager UI:   $RM_URL"
    echo "fs.defaultFS:         $HDFS_URI"
    echo "HADOOP_CONF_DIR:      $CONF"
    [[ -f "$CONF/spark-yarn.conf" ]] && echo "Spark on YARN:        --properties-file $CONF/spark-yarn.conf  ($(sed -n 's/^spark.yarn.archive *//p' "$CONF/spark-yarn.conf"))"
    echo "Shell environment:    eval \"\$(${HERE#"$ROOT/"}/hadoop.sh env)\""
}

# ----------------------------------------------------------------------------------------- spark archive

# WebHDFS as the current user (permissions are off; the name only shows up as the owner).
webhdfs() {
    local op="$1" path="$2"; shift 2
    echo "$NAMENODE_URL/webhdfs/v1$path?op=$op&user.name=$(id -un)$*"
}

# pyspark's version and jars folder: from the dist-info name (no Python start-up), else from Python.
pyspark_info() {
    local info=""
    for info in "$TRAINING_VENV"/lib/python3*/site-packages/pyspark-*.dist-info; do break; done
    if [[ -d "$info" && -d "$(dirname "$info")/pyspark/jars" ]]; then
        PYSPARK_VERSION="$(basename "$info" .dist-info)"
        PYSPARK_VERSION="${PYSPARK_VERSION#pyspark-}"
        PYSPARK_JARS="$(dirname "$info")/pyspark/jars"
        return 0
    fi
    if [[ ! -x "$TRAINING_VENV/bin/python" ]]; then
        echo "hadoop.sh: no training environment at ${TRAINING_VENV#"$ROOT/"} (make setup-training builds it)" >&2
        return 1
    fi
    read -r PYSPARK_VERSION PYSPARK_JARS < <("$TRAINING_VENV/bin/python" -c \
        'import os, pyspark; print(pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
    [[ -d "$PYSPARK_JARS" ]] || { echo "hadoop.sh: no jars folder in pyspark ($PYSPARK_JARS)" >&2; return 1; }
}

# spark.yarn.archive: all of Spark's jars (including its own Hadoop 3.3.4 client) in one uncompressed zip on
# HDFS; YARN localizes it once per node instead of spark-submit uploading ~320 MB of jars for every application.
cmd_spark_archive() {
    local zip name dest status size
    pyspark_info
    name="spark-jars-$PYSPARK_VERSION.zip"
    zip="$ROOT/.cache/spark/$name"
    dest="$SPARK_ARCHIVE_DIR/$name"
    if [[ ! -f "$zip" ]]; then
        echo "Zipping $(ls "$PYSPARK_JARS" | wc -l) jars of pyspark $PYSPARK_VERSION into ${zip#"$ROOT/"} ..."
        mkdir -p "$(dirname "$zip")"
        # Python's zipfile (the training environment is needed anyway): no zip/jar tool assumed. Stored, not
        # deflated: jars are compressed already.
        "$TRAINING_VENV/bin/python" - "$PYSPARK_JARS" "$zip.tmp.$$" <<'PY'
import os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
    for name in sorted(os.listdir(src)):
        if name.endswith(".jar"):
            archive.write(os.path.join(src, name), name)
PY
        mv -f "$zip.tmp.$$" "$zip"
    fi
    size="$(stat -c %s "$zip")"
    status="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$(webhdfs GETFILESTATUS "$dest")")" || status=000
    if [[ "$status" == 200 ]]; then
        echo "Spark archive already on HDFS: $HDFS_URI$dest"
    elif [[ "$status" == 404 ]]; then
        echo "Uploading ${zip#"$ROOT/"} ($((size / 1048576)) MB) to $HDFS_URI$dest over WebHDFS ..."
        local tmp="$dest._COPYING_.$$" location
        curl -fsS --max-time 10 -X PUT "$(webhdfs MKDIRS "$SPARK_ARCHIVE_DIR")" >/dev/null
        # WebHDFS CREATE is two steps: the NameNode answers 307 with the DataNode URL, the data goes there.
        location="$(curl -fsS --max-time 10 -X PUT -o /dev/null -w '%{redirect_url}' \
            "$(webhdfs CREATE "$tmp" '&overwrite=true')")"
        [[ -n "$location" ]] || { echo "hadoop.sh: WebHDFS CREATE gave no redirect" >&2; exit 1; }
        curl -fsS --max-time 300 -X PUT -T "$zip" -H 'Content-Type: application/octet-stream' "$location" >/dev/null
        # Uploaded under a temporary name, renamed when complete: a partial upload never looks like the archive.
        curl -fsS --max-time 10 -X PUT "$(webhdfs RENAME "$tmp" "&destination=$dest")" | grep -q true \
            || { echo "hadoop.sh: WebHDFS RENAME $tmp -> $dest failed" >&2; exit 1; }
    else
        echo "hadoop.sh: WebHDFS GETFILESTATUS $dest answered HTTP $status (is HDFS up? $0 status)" >&2
        exit 1
    fi
    # Spark reads a properties file with --properties-file (or copy these lines into a spark-defaults.conf).
    cat >"$CONF/spark-yarn.conf" <<EOF
# Written by infra/hadoop/hadoop.sh: Spark on this checkout's YARN. Use with
#   HADOOP_CONF_DIR=$CONF SPARK_LOCAL_IP=127.0.0.1 \\
#     spark-submit --properties-file $CONF/spark-yarn.conf ...
# (SPARK_LOCAL_IP only moves the driver's UI, port 4040+, from 0.0.0.0 to loopback.)
spark.master                            yarn
spark.yarn.archive                      $HDFS_URI$dest
spark.pyspark.python                    $TRAINING_VENV/bin/python
# Loopback everywhere, like the daemons: the driver (client mode) binds and advertises 127.0.0.1, and the
# ApplicationMaster and executors (containers on this NodeManager) bind there too.
spark.driver.host                       127.0.0.1
spark.driver.bindAddress                127.0.0.1
spark.yarn.appMasterEnv.SPARK_LOCAL_IP  127.0.0.1
spark.executorEnv.SPARK_LOCAL_IP        127.0.0.1
# The containers' JVMs as the daemons' (infra/hadoop/daemons.sh: short jobs on two cores).
spark.executor.extraJavaOptions         $SMALL_CLUSTER_JAVA_OPTS
spark.yarn.am.extraJavaOptions          $SMALL_CLUSTER_JAVA_OPTS
EOF
    echo "spark.yarn.archive=$HDFS_URI$dest"
}

# ---------------------------------------------------------------------------------------------- commands

cmd_up() {
    local missing=() d
    for d in "${DAEMONS[@]}"; do
        running_pid "$d" >/dev/null || missing+=("$d")
    done
    if ((${#missing[@]} == 0)); then
        echo "Hadoop is already up (namenode, datanode, resourcemanager, nodemanager); nothing to start."
        cmd_spark_archive
        print_endpoints
        return 0
    fi
    find_java
    resolve_jars
    if ((${#missing[@]} == ${#DAEMONS[@]})); then
        render_config
    else
        echo "Starting the missing daemons (${missing[*]}) with the running cluster's config ($PORTS_FROM)."
    fi
    mkdir -p "$LOGS" "$PIDS"
    check_ports_free "${missing[@]}"
    format_namenode_once
    for d in "${missing[@]}"; do
        start_daemon "$d"
    done
    wait_until_usable "${missing[@]}"
    cmd_spark_archive
    echo "Hadoop $HADOOP_VERSION is up."
    print_endpoints
}

cmd_down() {
    local d
    # NodeManager first (it stops its containers), HDFS last (YARN applications may still be writing).
    # Without log aggregation the NodeManager keeps finished applications until their logs expire (3 h), and on
    # SIGTERM it waits ~7 s for them and ~10 s for its log-deletion scheduler: ~17 s after any Spark job, < 2 s
    # otherwise. Hence the 30 s grace.
    for d in nodemanager resourcemanager datanode namenode; do
        stop_daemon "$d"
    done
}

cmd_status() {
    local d pid all=0 health nodes
    for d in "${DAEMONS[@]}"; do
        if pid="$(running_pid "$d")"; then
            printf '%-16s running (pid %s)\n' "$d" "$pid"
        else
            printf '%-16s stopped\n' "$d"
            all=3
        fi
    done
    if running_pid namenode >/dev/null; then
        if health="$(hdfs_health)"; then
            printf '%-16s %s, %s live DataNode(s)   %s\n' "HDFS" \
                "$([[ "$health" == Operational* ]] && echo "out of safe mode" || echo "IN SAFE MODE")" \
                "${health#* }" "$HDFS_URI"
        else
            printf '%-16s NameNode not answering on %s\n' "HDFS" "$NAMENODE_URL"
        fi
    fi
    if running_pid resourcemanager >/dev/null; then
        if nodes="$(yarn_running_nodes)"; then
            printf '%-16s %s RUNNING NodeManager(s)   %s\n' "YARN" "$nodes" "$RM_URL"
        else
            printf '%-16s ResourceManager not answering on %s\n' "YARN" "$RM_URL"
        fi
    fi
    return "$all"
}

cmd_env() {
    echo "export HADOOP_CONF_DIR=$CONF"
    echo "export CLOUDBURST_HDFS_URI=$HDFS_URI"
    echo "export CLOUDBURST_WEBHDFS_PORT=$WEBHDFS_PORT"
    echo "export CLOUDBURST_YARN_WEB=127.0.0.1:$RM_WEB_PORT"
    # Spark drivers bind loopback too (else the first interface), like every daemon here.
    echo "export SPARK_LOCAL_IP=127.0.0.1"
    if [[ -f "$CONF/spark-yarn.conf" ]]; then
        echo "export CLOUDBURST_SPARK_YARN_ARCHIVE=$(sed -n 's/^spark.yarn.archive *//p' "$CONF/spark-yarn.conf")"
    fi
    echo "export CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS='$SMALL_CLUSTER_JAVA_OPTS'"
}

# Hadoop's own HDFS admin tool (what `hdfs dfsadmin` runs), e.g. `hadoop.sh dfsadmin -safemode get|enter|leave`
# or `-report`; bounded like everything here.
cmd_dfsadmin() {
    find_java
    resolve_jars
    set_jvm_opts dfsadmin 256m
    HADOOP_CONF_DIR="$CONF" timeout 120 "$JAVA" "${JVM_OPTS[@]}" -cp "$CLASSPATH_" \
        org.apache.hadoop.hdfs.tools.DFSAdmin "$@"
}

load_ports
case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    spark-archive) cmd_spark_archive ;;
    dfsadmin) shift; cmd_dfsadmin "$@" ;;
    *) echo "usage: $0 up|down|status|env|spark-archive|dfsadmin ARGS" >&2; exit 2 ;;
esac
