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

import datetime

from airflow.sdk import Asset, dag, task
from cloudburst_operators import CloudburstCommandOperator, CloudburstSparkJobOperator, validate_run
from cloudburst_params import SPEECH_ONLY, run_params

WORKLOAD = "mnist_elastic_cnn"
MNIST_RAW = Asset(name="mnist_raw", uri="x-cloudburst://datasets/mnist/raw")
MNIST_ELASTIC = Asset(name="mnist_elastic", uri="x-cloudburst://datasets/mnist/elastic")
MNIST_SHARDS = Asset(name="mnist_shards", uri="x-cloudburst://datasets/mnist/shards")
MNIST_MODEL = Asset(name="mnist_elastic_cnn_model", uri="x-cloudburst://models/mnist_elastic_cnn")


@dag(
    dag_id=WORKLOAD,
    dag_display_name="MNIST elastic CNN",
    description="MNIST with elastic deformation: ingest → augment → shard → train → evaluate",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    params=run_params(omit=SPEECH_ONLY),
    default_args={"retries": 1, "retry_delay": datetime.timedelta(seconds=15)},
    tags=["cloudburst", "mnist", "horovod", "downpour", "averaging"],
)
def mnist_elastic_cnn():
    @task(task_id="validate_run", retries=0)
    def validate(**context):
        return validate_run(WORKLOAD, **context)

    ingest = CloudburstCommandOperator(task_id="ingest", step="ingest", workload=WORKLOAD, outlets=[MNIST_RAW])
    augment = CloudburstSparkJobOperator(task_id="augment", step="augment", workload=WORKLOAD,
                                         outlets=[MNIST_ELASTIC])
    shard = CloudburstSparkJobOperator(task_id="shard", step="shard", workload=WORKLOAD, outlets=[MNIST_SHARDS])
    train = CloudburstSparkJobOperator(task_id="train", step="train", workload=WORKLOAD, outlets=[MNIST_MODEL])
    evaluate = CloudburstCommandOperator(task_id="evaluate", step="evaluate", workload=WORKLOAD)

    validate() >> ingest >> augment >> shard >> train >> evaluate


mnist_elastic_cnn_dag = mnist_elastic_cnn()
