"""
### MNIST elastic CNN

A Simard-style CNN trained on MNIST enlarged with Gaussian elastic deformations (Simard, Steinkraus & Platt 2003),
in parallel on Spark.

**ingest** (IDX → Parquet, validated) → **augment** (k deformed copies per training image, Spark) →
**shard** (nodes × workers_per_node stratified shards, Spark) → **train** (the chosen strategy, Spark) →
**evaluate** (test accuracy, confusion matrix, model) — every result in the MLflow experiment
`mnist_elastic_cnn`, with speedup against the newest comparable one-worker run.

Every step publishes atomically and is idempotent, so retries are safe; a retried training resumes from its
last checkpoint. Manual trigger by default: see the README to schedule it.
"""

from __future__ import annotations

from cloudburst_dags import workload_dag  # an Airflow DAG per workload (this line also passes Airflow's safe-mode scan)

mnist_elastic_cnn_dag = workload_dag("mnist_elastic_cnn", doc_md=__doc__)
