#!/usr/bin/env bash
# infra/keep-summary.sh NEW KEPT: a demo's summary NEW replaces KEPT (var/demo-<dag>[-<preset>]-summary.txt) unless
# it names the same MLflow runs: a re-run that trained nothing keeps the summary of the demo that trained them, whose
# wall time is the one `make record-results` should copy, not the re-run's few seconds. NEW is removed either way.
set -euo pipefail
new=$1 kept=$2
# Compared by run id only: the store's path printed beside it may differ (another checkout of the same var/).
runs() { grep -oE '^MLflow run +[0-9a-f]+' "$1"; }
if [[ -f "$kept" ]] && runs "$new" > /dev/null && diff -q <(runs "$kept") <(runs "$new") > /dev/null; then
    rm "$new"
    echo "[demo] the same runs as before: $kept keeps the wall time of the demo that trained them"
else
    mv "$new" "$kept"
fi
