"""Typed DAG Params for Cloudburst runs: one per run-specification field, with a title and a description, so the
trigger form explains itself. Names are exactly the RunSpec field names."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from training.config import FEATURE_KINDS, FIELD_DOCS, KWS_TASKS, SERVER_OPTIMIZERS, STRATEGIES, RunSpec

DATA = "Data"
AUGMENTATION = "Augmentation"
CLUSTER = "Cluster shape"
TRAINING = "Training"
HOROVOD = "Horovod communication"
DOWNPOUR = "Downpour parameter server"
ADVANCED = "Advanced"

PARAM_SCHEMA: dict[str, tuple[str, str, dict[str, Any]]] = {  # field → (JSON type, section, constraints)
    "data_source": ("string", DATA, {}),
    "data_sha256": ("string", DATA, {}),
    "speakers": ("integer", DATA, {"minimum": 1, "maximum": 2000}),
    "kws_task": ("integer", DATA, {"enum": list(KWS_TASKS)}),
    "resample": ("boolean", DATA, {}),
    "features": ("string", AUGMENTATION, {"enum": list(FEATURE_KINDS)}),
    "train_limit": ("integer", DATA, {"minimum": 0}),
    "test_limit": ("integer", DATA, {"minimum": 0}),
    "augment_copies": ("integer", AUGMENTATION, {"minimum": 0, "maximum": 50}),
    "alpha": ("number", AUGMENTATION, {"minimum": 0}),
    "sigma": ("number", AUGMENTATION, {"exclusiveMinimum": 0}),
    "nodes": ("integer", CLUSTER, {"minimum": 1, "maximum": 64}),
    "workers_per_node": ("integer", CLUSTER, {"minimum": 1, "maximum": 64}),
    "strategy": ("string", TRAINING, {"enum": list(STRATEGIES)}),
    "epochs": ("integer", TRAINING, {"minimum": 1}),
    "batch_size_per_worker": ("integer", TRAINING, {"minimum": 1}),
    "learning_rate": ("number", TRAINING, {"exclusiveMinimum": 0}),
    "warmup_epochs": ("integer", TRAINING, {"minimum": 0}),
    "seed": ("integer", TRAINING, {"minimum": 0}),
    "target_accuracy": ("number", TRAINING, {"exclusiveMinimum": 0, "maximum": 1}),
    "evaluations_per_epoch": ("integer", TRAINING, {"minimum": 1}),
    "fp16_compression": ("boolean", HOROVOD, {}),
    "backward_passes_per_step": ("integer", HOROVOD, {"minimum": 1}),
    "n_fetch": ("integer", DOWNPOUR, {"minimum": 1}),
    "n_push": ("integer", DOWNPOUR, {"minimum": 1}),
    "ps_shards": ("integer", DOWNPOUR, {"minimum": 1, "maximum": 64}),
    "server_optimizer": ("string", DOWNPOUR, {"enum": list(SERVER_OPTIMIZERS)}),
    "server_learning_rate": ("number", DOWNPOUR, {"exclusiveMinimum": 0}),
    "warm_start_steps": ("integer", DOWNPOUR, {"minimum": 0}),
    "threads_per_worker": ("integer", ADVANCED, {"minimum": 0}),
    "existing_shards": ("string", ADVANCED, {}),
    "data_root": ("string", ADVANCED, {}),
    "tracking_uri": ("string", ADVANCED, {}),
    "run_name": ("string", ADVANCED, {}),
}


# Settings that mean nothing to a workload stay off its trigger form.
MNIST_ONLY = ("train_limit", "test_limit", "alpha", "sigma")
SPEECH_ONLY = ("data_sha256", "speakers", "kws_task", "resample", "features")


def run_params(omit: tuple[str, ...] = (), **defaults: Any) -> dict[str, Param]:
    """Params for every RunSpec field except ``workload`` and ``omit``, with the RunSpec defaults unless
    overridden."""
    spec = RunSpec()
    params: dict[str, Param] = {}
    for name, (json_type, section, extra) in PARAM_SCHEMA.items():
        if name in omit:
            continue
        title, description = FIELD_DOCS[name]
        default = defaults.get(name, getattr(spec, name))
        if name == "run_name":
            default = defaults.get(name, "")
        # The form sends an empty optional text field as null: allow it, and the run spec's default applies.
        schema_type = ["null", json_type] if json_type == "string" and default == "" else json_type
        params[name] = Param(default, type=schema_type, title=title, description=description, section=section,
                             **extra)
    return params
