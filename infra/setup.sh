#!/usr/bin/env bash
# Builds the two Python environments Cloudburst needs, idempotently.
#   .venv/training : TensorFlow 2.15 + Horovod (Gloo) + pyspark 3.5 — runs every Spark job and training process
#   .venv/airflow  : Airflow 3 + Spark/HDFS providers + MLflow — orchestration and UIs
#   .venv/docs     : MkDocs + Material — the docs site (make docs)
# They cannot be one environment (protobuf <5 for TensorFlow vs >=5.26 for the Spark provider).
# A second run does nothing; a changed requirements file re-runs pip for that environment only.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements_dir="$repo_root/infra/requirements"
venv_root="${CLOUDBURST_VENV_ROOT:-$repo_root/.venv}"
python_bin="${CLOUDBURST_PYTHON:-python3.11}"
only="${1:-all}"   # all | training | airflow

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# pip, minus one warning per package about index folders that this machine's global pip.conf names but lacks.
pip_quietly() {
  local pip="$1"; shift
  "$pip" "$@" 2> >(grep -v "^WARNING: Location 'file:///opt/" >&2)
}

# MBROLA lives in Debian's contrib and most of its voices in non-free; SVOX Pico (libttspico-utils), the OALD lexicon of
# festival's British voices (festlex-oald) and RHVoice (librhvoice5, rhvoice-english) are non-free too. Adds the two
# components to the Debian entries that lack them; succeeds (0) only when it changed a file.
enable_contrib_and_non_free() {
  local sudo="$1" changed=1 file
  local missing_component='/ contrib( |$)/ && / non-free( |$)/ {next} {found=1} END {exit !found}'
  local add_components='{/ contrib( |$)/! s/$/ contrib/; / non-free( |$)/! s/$/ non-free/}'
  for file in /etc/apt/sources.list.d/debian.sources; do  # deb822, Debian 12's default
    if [ -f "$file" ] && grep -E '^Components:' "$file" | awk "$missing_component"; then
      log "enabling Debian contrib and non-free in $file (MBROLA, Pico and RHVoice voices)"
      $sudo sed -i -E "/^Components:/$add_components" "$file"
      changed=0
    fi
  done
  file=/etc/apt/sources.list  # the one-line format
  if [ -f "$file" ] && grep -E '^deb(-src)?[[:space:]][^#]*debian' "$file" | awk "$missing_component"; then
    log "enabling Debian contrib and non-free in $file (MBROLA, Pico and RHVoice voices)"
    $sudo sed -i -E "/^deb(-src)?[[:space:]][^#]*debian/$add_components" "$file"
    changed=0
  fi
  return $changed
}

install_debian_packages() {
  local wanted=(libkrb5-dev openjdk-17-jre-headless g++ cmake make procps)
  # Maven resolves the pinned Apache Hadoop jars from Maven Central (infra/hadoop/resolve.sh).
  wanted+=(maven)
  # The cluster of several hosts in network namespaces (infra/cluster/netns.sh): ip/tc, unshare/nsenter, curl.
  wanted+=(iproute2 util-linux curl)
  # STORE=postgres and its tests: a PostgreSQL cluster of the checkout's own (infra/postgres.sh).
  wanted+=(postgresql)
  # Offline TTS engines and voices for the synthetic Speech Commands corpus (training/speech/synthesis/,
  # whose docstring says which voices are used and why others are not): English and foreign-accented families.
  wanted+=(espeak-ng espeak flite sox libttspico-utils librhvoice5 rhvoice-english)
  wanted+=(mbrola mbrola-en1 mbrola-us1 mbrola-us2 mbrola-de1 mbrola-de2 mbrola-de5 mbrola-fr1 mbrola-fr4 mbrola-it3
           mbrola-it4 mbrola-nl2 mbrola-pl1 mbrola-sw1 mbrola-sw2)
  wanted+=(festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts festvox-rablpc16k festvox-don festvox-us1
           festvox-us2 festvox-us3 festvox-en1 festvox-ellpc11k festvox-italp16k festvox-itapc16k festvox-suopuhe-mv
           festvox-czech-dita festvox-czech-machac)
  # Node.js and npm: bench/kws_foreign_engine.py runs SAM (sam-js from npm), a synthesiser the corpus never uses.
  # Only when missing: a Node.js from elsewhere (e.g. NodeSource's, which bundles npm) is kept.
  command -v node > /dev/null && command -v npm > /dev/null || wanted+=(nodejs npm)
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  local sources_changed=false
  if enable_contrib_and_non_free "$sudo"; then sources_changed=true; fi
  local missing=()
  for package in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})) || $sources_changed; then
    $sudo apt-get update -qq
  fi
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  fi
}

# The stamp is the hash of everything that decides an environment's contents.
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

ensure_venv() {
  local venv="$1"
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    "$python_bin" -m venv "$venv"
    pip_quietly "$venv/bin/pip" install -q --upgrade 'pip==24.2' 'setuptools==70.3.0' 'wheel==0.44.0'
  fi
}

# build_env NAME INSTALL STAMP_FILE…: the environment .venv/NAME, filled by the function INSTALL (given the venv),
# rebuilt only when the files that decide its contents changed (their hash is its stamp), checked, then stamped.
build_env() {
  local name="$1" install="$2"; shift 2
  local venv="$venv_root/$name" stamp
  stamp=$(stamp_of "$@")
  if [ -f "$venv/.cloudburst-stamp" ] && [ "$(cat "$venv/.cloudburst-stamp")" = "$stamp" ]; then
    log "$name environment up to date ($venv)"; return
  fi
  ensure_venv "$venv"
  "$install" "$venv"
  "$venv/bin/pip" check
  echo "$stamp" > "$venv/.cloudburst-stamp"
  log "$name environment ready"
}

install_training() {
  local venv="$1"
  log "installing training requirements (TensorFlow, pyspark 3.5, MLflow) — a few minutes when cold"
  pip_quietly "$venv/bin/pip" install -q -r "$requirements_dir/training.txt" \
    -c "$requirements_dir/training-constraints.txt"
  if ! "$venv/bin/python" -c 'import horovod.tensorflow' 2>/dev/null; then
    log "installing Horovod with TensorFlow + Gloo (compiles ~4 min the first time; pip's wheel cache keeps the result)"
  fi
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 MAKEFLAGS="-j$(nproc)" \
    pip_quietly "$venv/bin/pip" install -q --no-build-isolation -r "$requirements_dir/horovod.txt" \
      -c "$requirements_dir/training-constraints.txt"
  pip_quietly "$venv/bin/pip" install -q --no-deps -e "$repo_root"
}

install_airflow() {
  local venv="$1"
  log "installing Airflow requirements — a few minutes when cold"
  pip_quietly "$venv/bin/pip" install -q -r "$requirements_dir/airflow.txt"
  # Only the light modules (run specification, storage) are imported by DAGs; heavy ones load inside tasks.
  pip_quietly "$venv/bin/pip" install -q --no-deps -e "$repo_root"
}

install_docs() {
  local venv="$1"
  log "installing the docs requirements (MkDocs, Material)"
  pip_quietly "$venv/bin/pip" install -q -r "$requirements_dir/docs.txt" -c "$requirements_dir/docs-constraints.txt"
}

build_training_env() {
  build_env training install_training "$requirements_dir/training.txt" "$requirements_dir/training-constraints.txt" \
    "$requirements_dir/horovod.txt" "$repo_root/pyproject.toml"
}
build_airflow_env() { build_env airflow install_airflow "$requirements_dir/airflow.txt" "$repo_root/pyproject.toml"; }
build_docs_env() { build_env docs install_docs "$requirements_dir/docs.txt" "$requirements_dir/docs-constraints.txt"; }

case "$only" in
  training) install_debian_packages; build_training_env ;;
  airflow) install_debian_packages; build_airflow_env ;;
  docs) build_docs_env ;;
  all) install_debian_packages; build_training_env; build_airflow_env; build_docs_env ;;
  *) echo "usage: infra/setup.sh [all|training|airflow|docs]" >&2; exit 2 ;;
esac
