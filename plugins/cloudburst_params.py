"""Typed DAG Params for Cloudburst runs: one per run-specification field, with a title and a description, so the
trigger form explains itself. Names are exactly the RunSpec field names."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from training.config import STRATEGIES, RunSpec

DATA = "Data"
AUGMENTATION = "Augmentation"
CLUSTER = "Cluster shape"
TRAINING = "Training"
HOROVOD = "Horovod communication"
ADVANCED = "Advanced"

# field → (JSON type, section, title, description, extra JSON-schema keywords)
PARAM_DOCS: dict[str, tuple[str, str, str, str, dict[str, Any]]] = {
    "data_source": ("string", DATA, "Data source",
                    "A directory holding the four MNIST IDX files (.gz or raw) with an optional SHA256SUMS, or an "
                    "http(s) base URL. Default: the copy vendored in the repository (offline).", {"minLength": 1}),
    "train_limit": ("integer", DATA, "Training images (0 = all)",
                    "Keep only the first N training images: quick runs and tests. 0 uses all 60,000.",
                    {"minimum": 0}),
    "test_limit": ("integer", DATA, "Test images (0 = all)", "Keep only the first N test images.", {"minimum": 0}),
    "augment_copies": ("integer", AUGMENTATION, "Augmentation copies k",
                       "Elastically deformed copies per training image (originals are kept; the test split is "
                       "never augmented).", {"minimum": 0, "maximum": 50}),
    "alpha": ("number", AUGMENTATION, "α (displacement scale, pixels)",
              "Scale of the smoothed random displacement field (Simard et al. 2003 use 34).", {"minimum": 0}),
    "sigma": ("number", AUGMENTATION, "σ (smoothing, pixels)",
              "Standard deviation of the Gaussian that smooths the displacement field (Simard et al.: 4).",
              {"exclusiveMinimum": 0}),
    "nodes": ("integer", CLUSTER, "Nodes",
              "Machines taking part. In local mode a node is simulated by a group of Spark task slots.",
              {"minimum": 1, "maximum": 64}),
    "workers_per_node": ("integer", CLUSTER, "Workers per node",
                         "Training processes on each node; total workers = nodes × workers per node, and the data "
                         "is cut into that many shards. Each worker gets the node's cores ÷ workers per node "
                         "TensorFlow threads.", {"minimum": 1, "maximum": 64}),
    "strategy": ("string", TRAINING, "Strategy",
                 "How workers combine their work. horovod: synchronous ring all-reduce of gradients every step "
                 "(Horovod on Spark, Gloo). averaging: MapReduce model averaging, evaluations_per_epoch rounds per "
                 "epoch of local training, weights averaged by examples seen.",
                 {"enum": list(STRATEGIES)}),
    "epochs": ("integer", TRAINING, "Epochs", "Passes over the (augmented) training set.", {"minimum": 1}),
    "batch_size_per_worker": ("integer", TRAINING, "Batch size per worker",
                              "Examples per step on each worker; the global batch is this × total workers. Larger "
                              "batches talk less often and scale better.", {"minimum": 1}),
    "learning_rate": ("number", TRAINING, "Learning rate (one worker)",
                      "Adam's learning rate for one worker; Horovod scales it by the number of workers after a "
                      "warm-up.", {"exclusiveMinimum": 0}),
    "warmup_epochs": ("integer", TRAINING, "Warm-up epochs",
                      "Epochs over which the learning rate ramps from the one-worker value to the scaled one.",
                      {"minimum": 0}),
    "seed": ("integer", TRAINING, "Seed", "Seeds augmentation, sharding and weight initialisation.", {"minimum": 0}),
    "target_accuracy": ("number", TRAINING, "Target accuracy",
                        "Time-to-target is the training time until the test accuracy first reaches this.",
                        {"exclusiveMinimum": 0, "maximum": 1}),
    "evaluations_per_epoch": ("integer", TRAINING, "Evaluations per epoch",
                              "How often test accuracy is measured during training (for time-to-target).",
                              {"minimum": 1}),
    "fp16_compression": ("boolean", HOROVOD, "fp16 gradient compression",
                         "Send gradients as float16: half the bytes on the wire.", {}),
    "backward_passes_per_step": ("integer", HOROVOD, "Backward passes per step",
                                 "Accumulate gradients locally over this many batches before each all-reduce.",
                                 {"minimum": 1}),
    "threads_per_worker": ("integer", ADVANCED, "Threads per worker (0 = automatic)",
                           "TensorFlow intra-op threads per worker; 0 means the node's cores ÷ workers per node.",
                           {"minimum": 0}),
    "existing_shards": ("string", ADVANCED, "Existing shards (optional)",
                        "URI of shards made earlier to train on instead of sharding for this run; needs at least "
                        "one shard per worker.", {}),
    "data_root": ("string", ADVANCED, "Data root (optional)",
                  "Where datasets and runs live: a path, file:// or hdfs:// URI. Empty: $CLOUDBURST_DATA_ROOT or "
                  "./var/datasets.", {}),
    "tracking_uri": ("string", ADVANCED, "MLflow tracking URI (optional)",
                     "Empty: $MLFLOW_TRACKING_URI or SQLite under ./var/mlflow.", {}),
    "run_name": ("string", ADVANCED, "Run name (optional)",
                 "Names the run's directory (checkpoints, model). Empty: derived from the DAG run id, so a retried "
                 "task resumes the same run.", {}),
}


def run_params(**defaults: Any) -> dict[str, Param]:
    """Params for every RunSpec field except ``workload``, with the RunSpec defaults unless overridden."""
    spec = RunSpec()
    params: dict[str, Param] = {}
    for name, (json_type, section, title, description, extra) in PARAM_DOCS.items():
        default = defaults.get(name, getattr(spec, name))
        if name == "run_name":
            default = defaults.get(name, "")
        # The form sends an empty optional text field as null: allow it, and the run spec's default applies.
        schema_type = ["null", json_type] if json_type == "string" and default == "" else json_type
        params[name] = Param(default, type=schema_type, title=title, description=description, section=section,
                             **extra)
    return params
