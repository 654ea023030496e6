"""
### Keyword spotting: DenseNet-BiLSTM on Speech Commands

The DenseNet-BiLSTM keyword spotter of Zeng & Xiao (2019) trained in parallel on Spark, on Google Speech Commands
(a directory, a `.tar.gz` or a URL) or, by default, on a corpus in the same layout synthesised offline.

**ingest** (synthesise when the source is `synthetic`; check every clip, list bad ones in `ingest_report.json`;
split by the lists or the sha1 rule; label for the 12- or 35-class task) → **features** (log-mel or MFCC with
tf.signal, plus augmented copies of the training clips: time shift and background noise, Spark) → **shard**
(nodes × workers_per_node stratified shards, Spark) → **train** (the chosen strategy, Spark) → **evaluate**
(test accuracy on held-out speakers, per-class accuracy, confusion matrix, model) — every result in the MLflow
experiment `kws_densenet_bilstm`, under the same metric names as the MNIST runs.

Every step publishes atomically and is idempotent, so retries are safe; a retried training resumes from its
last checkpoint. Manual trigger by default.
"""

from __future__ import annotations

from cloudburst_dags import workload_dag  # an Airflow DAG per workload (this line also passes Airflow's safe-mode scan)

kws_densenet_bilstm_dag = workload_dag("kws_densenet_bilstm", doc_md=__doc__)
