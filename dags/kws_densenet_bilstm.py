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

import datetime

from airflow.sdk import Asset, dag, task
from cloudburst_operators import CloudburstCommandOperator, CloudburstSparkJobOperator, validate_run
from cloudburst_params import MNIST_ONLY, run_params

WORKLOAD = "kws_densenet_bilstm"
KWS_CLIPS = Asset(name="speech_commands_clips", uri="x-cloudburst://datasets/speech_commands/clips")
KWS_FEATURES = Asset(name="speech_commands_features", uri="x-cloudburst://datasets/speech_commands/features")
KWS_SHARDS = Asset(name="speech_commands_shards", uri="x-cloudburst://datasets/speech_commands/shards")
KWS_MODEL = Asset(name="kws_densenet_bilstm_model", uri="x-cloudburst://models/kws_densenet_bilstm")

# What `make demo-kws` runs; the form starts from the same values.
KWS_DEFAULTS = {"data_source": "synthetic", "epochs": 12, "augment_copies": 2, "batch_size_per_worker": 64,
                "learning_rate": 0.002, "target_accuracy": 0.9, "evaluations_per_epoch": 2}


@dag(
    dag_id=WORKLOAD,
    dag_display_name="Keyword spotting DenseNet-BiLSTM",
    description="Speech Commands keyword spotting: ingest → features → shard → train → evaluate",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    params=run_params(omit=MNIST_ONLY, **KWS_DEFAULTS),
    default_args={"retries": 1, "retry_delay": datetime.timedelta(seconds=15)},
    tags=["cloudburst", "speech", "keyword-spotting", "horovod", "downpour", "averaging"],
)
def kws_densenet_bilstm():
    @task(task_id="validate_run", retries=0)
    def validate(**context):
        return validate_run(WORKLOAD, **context)

    ingest = CloudburstCommandOperator(task_id="ingest", step="ingest", workload=WORKLOAD, outlets=[KWS_CLIPS])
    features = CloudburstSparkJobOperator(task_id="features", step="features", workload=WORKLOAD,
                                          outlets=[KWS_FEATURES])
    shard = CloudburstSparkJobOperator(task_id="shard", step="shard", workload=WORKLOAD, outlets=[KWS_SHARDS])
    train = CloudburstSparkJobOperator(task_id="train", step="train", workload=WORKLOAD, outlets=[KWS_MODEL])
    evaluate = CloudburstCommandOperator(task_id="evaluate", step="evaluate", workload=WORKLOAD)

    validate() >> ingest >> features >> shard >> train >> evaluate


kws_densenet_bilstm_dag = kws_densenet_bilstm()
