#!/usr/bin/env bash
# infra/keep-summary.sh NEW KEPT: a demo's summary NEW replaces KEPT (var/demo-<dag>[-<preset>]-summary.txt) unless
# it names the same MLflow runs: a re-run that trained nothing keeps the summary of the demo that trained them, whose
# wall time is the one `make record-results` should copy, not the re-run's few seconds. NEW is removed either way.
set -euo pipefail
new=$1 kept=$2
if [[ -f "$kept" ]] && grep -q '^MLflow run' "$new" \
        && diff -q <(grep '^MLflow run' "$kept") <(grep '^MLflow run' "$new") > /dev/null; then
    rm "$new"
    echo "[demo] the same runs as before: $kept keeps the wall time of the demo that trained them"
else
    mv "$new" "$kept"
fi
