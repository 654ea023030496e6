#!/usr/bin/env bash
# Resolves the Hadoop jars pinned in infra/hadoop/pom.xml from Maven Central, once.
#   infra/hadoop/resolve.sh        prints the resolved folder (stdout, last line); progress goes to stderr
# Result: .cache/hadoop/<hadoop version>-<sha of pom.xml>/
#   lib/         every runtime jar (the daemons run as `java -cp "$HADOOP_CONF_DIR:resources:lib/*"`)
#   resources/   webapps/ for the NameNode and DataNode HTTP servers (see the comment in pom.xml)
#   .complete    the stamp: present only after a successful resolve, so a second call is a no-op (< 1 s)
#   maven.log    Maven's output (shown on failure); target/ is Maven's scratch folder
# A changed pom.xml has another sha, hence another folder: it re-resolves and never mixes jar sets.
# Maven's own repository is the user's, ~/.m2/repository, like pip's wheel cache: a clean clone (CI) copies the
# jars from it in seconds instead of downloading ~80 s again (override: CLOUDBURST_MAVEN_REPO).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
POM="$ROOT/infra/hadoop/pom.xml"
CACHE="$ROOT/.cache/hadoop"
MAVEN_REPO="${CLOUDBURST_MAVEN_REPO:-$HOME/.m2/repository}"
MAVEN_TIMEOUT="${CLOUDBURST_MAVEN_TIMEOUT:-900}"   # seconds; a cold resolve downloads ~100 MB

version="$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$POM" | head -1)"
[[ -n "$version" ]] || { echo "resolve.sh: no <hadoop.version> in $POM" >&2; exit 1; }
sha="$(sha256sum "$POM" | cut -c1-12)"
out="$CACHE/$version-$sha"

# Fast path, no lock, no JVM: the stamp says this exact pom was resolved completely.
if [[ -f "$out/.complete" ]]; then
    echo "$out"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "resolve.sh: Maven (mvn) is not installed; it fetches Hadoop $version from Maven Central." >&2
    echo "  Debian/Ubuntu: apt-get install -y maven   (needs a JDK 17: openjdk-17-jdk-headless)" >&2
    exit 1
fi

mkdir -p "$CACHE" "$MAVEN_REPO"
# Two resolves at once (say `make hadoop-up` in two shells) must not write the same folder.
exec 9>"$CACHE/.lock"
if ! flock -w "$MAVEN_TIMEOUT" 9; then
    echo "resolve.sh: another resolve holds $CACHE/.lock for over ${MAVEN_TIMEOUT} s" >&2
    exit 1
fi
if [[ -f "$out/.complete" ]]; then   # the other one finished it while we waited
    echo "$out"
    exit 0
fi

echo "Resolving Hadoop $version from Maven Central into ${out#"$ROOT/"} (Maven repository: $MAVEN_REPO) ..." >&2
rm -rf "$out"
mkdir -p "$out"
log="$out/maven.log"
start=$SECONDS
# Both executions (ids lib and webapps, configured in pom.xml) in one Maven JVM.
if ! timeout "$MAVEN_TIMEOUT" mvn -q -B -f "$POM" \
        -Dmaven.repo.local="$MAVEN_REPO" -Dstyle.color=never \
        -Dcloudburst.out="$out" \
        dependency:copy-dependencies@lib dependency:unpack@webapps >"$log" 2>&1; then
    echo "resolve.sh: Maven failed (or ran over ${MAVEN_TIMEOUT} s) resolving Hadoop $version; last lines of $log:" >&2
    tail -n 30 "$log" | sed 's/\x1b\[[0-9;]*m//g' >&2   # minus the colour codes Maven prints even with -B
    echo "Only Maven Central is needed; check the network/proxy (~/.m2/settings.xml) and re-run." >&2
    exit 1
fi
# Sanity: the four daemons' jars and the webapps the HTTP servers insist on.
for must in "lib/hadoop-hdfs-$version.jar" "lib/hadoop-yarn-server-resourcemanager-$version.jar" \
            "lib/hadoop-yarn-server-nodemanager-$version.jar" "resources/webapps/hdfs/WEB-INF/web.xml" \
            "resources/webapps/datanode"; do
    if [[ ! -e "$out/$must" ]]; then
        echo "resolve.sh: Maven succeeded but $out/$must is missing; see $log" >&2
        exit 1
    fi
done
echo "$version $sha $(date -Is)" >"$out/.complete"
echo "Resolved $(ls "$out/lib" | wc -l) jars in $((SECONDS - start)) s." >&2
echo "$out"
