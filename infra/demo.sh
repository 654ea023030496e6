#!/usr/bin/env bash
# The demo on the embedded default: Spark local[*], ./var standing in for HDFS.
# Today it runs the data half of the pipeline (ingest → augment → shard) on the full MNIST;
# training, evaluation and MLflow tracking arrive with the training issue.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cloudburst=.venv/training/bin/cloudburst
started=$(date +%s)
$cloudburst ingest mnist
$cloudburst augment --copies 1
$cloudburst shard --nodes 1 --workers-per-node 2
$cloudburst preview --out var/elastic-preview.png
echo
echo "Data half done in $(( $(date +%s) - started )) s: datasets under var/datasets/mnist/, preview in var/elastic-preview.png."
echo "Training, evaluation and MLflow tracking are not part of this demo yet (next issue)."
