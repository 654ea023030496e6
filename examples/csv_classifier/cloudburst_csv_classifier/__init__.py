"""CSV classifier: a workload from outside Cloudburst's tree — bring your own tabular data.

A CSV file with a header, numeric feature columns and one label column → a small dense Keras classifier, through
ingest → shard → train → evaluate under any strategy. Registered by this distribution's entry point (group
``cloudburst.workloads``, pyproject.toml). Standard library only: the Airflow environment imports this module; the
data and the model are in :mod:`.trainable` (training environment).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from training.contract import EVALUATE, INGEST, SHARD, TRAIN
from training.settings import DATA, TRAINING, RunSpecError, Setting, shown
from training.workload_definition import WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec

NAME = "csv_classifier"
# scikit-learn's copy of the UCI Wine data, written by make_sample_csv.py: the offline default.
SAMPLE_CSV = Path(__file__).resolve().parent / "data" / "wine.csv"

SETTINGS = (
    Setting("label_column", str, "class", "Label column",
            "The CSV column that holds each row's class (any text or number); every other column is a numeric "
            "feature.", DATA, max_length=200),
    Setting("hidden_units", int, 32, "Hidden units",
            "Units of the classifier's two hidden layers.", TRAINING, minimum=1, maximum=4096),
)


def _dataset_name(spec: RunSpec) -> str:
    """The file's stem (the sample's is fixed, so both environments agree wherever the package is installed) and a
    digest of the source and label column: another file or label column is another dataset."""
    source = spec.data_source or "sample"
    stem = "sample-wine" if not spec.data_source else re.sub(r"[^A-Za-z0-9_.-]", "_", Path(source).stem)[:40]
    digest = hashlib.sha1(json.dumps([source, spec.label_column]).encode()).hexdigest()[:10]
    return f"{stem or 'csv'}-{digest}"


def dataset_uri(spec: RunSpec) -> str:
    """Where ingest publishes the CSV's splits: ``<data root>/csv_classifier/<file>-<digest>-seed<seed>``."""
    return f"{spec.resolved_data_root().rstrip('/')}/{NAME}/{_dataset_name(spec)}-seed{spec.seed}"


def check_source(spec: RunSpec) -> None:
    source = spec.resolved_data_source()
    if urlsplit(source).scheme:
        raise RunSpecError(f"data_source={shown(source)}: the CSV classifier reads a local CSV file; copy the file "
                           "to the machine that runs ingest and give its path")
    if not Path(source).exists():
        raise RunSpecError(f"data_source={shown(source)}: no such file (give the path of a CSV file, or leave it "
                           "empty for the sample)")


DEFINITION = WorkloadDefinition(
    name=NAME,
    title="CSV classifier",
    # The study's time estimate: the bundled sample's training split (60 % of 178 rows); a small dense network
    # costs no more per example than the MNIST CNN. Set these for your own data.
    study_training_examples=107, study_seconds_per_example=0.0004,
    description="Your own CSV: ingest (validate, split) → shard → train → evaluate",
    steps=(INGEST, SHARD, TRAIN, EVALUATE),
    raw_uri=dataset_uri,
    train_uri=dataset_uri,  # no augmentation: training reads the ingested splits
    ingest="cloudburst_csv_classifier.trainable:ingest",
    trainable="cloudburst_csv_classifier.trainable:trainable",
    default_source=str(SAMPLE_CSV),
    settings=SETTINGS,
    source_help="CSV classifier: the path of a local CSV file (a header row, numeric feature columns, the "
                "label_column); empty: the bundled sample, the UCI Wine data (178 rows, 3 classes).",
    check_source=check_source,
    # Small data: many short epochs, a few steps each. Horovod scales learning_rate by the workers.
    defaults={"epochs": 20, "batch_size_per_worker": 16, "learning_rate": 0.01, "target_accuracy": 0.9,
              "augment_copies": 0, "evaluations_per_epoch": 1, "rounds_per_epoch": 2, "server_learning_rate": 0.05},
    tags=("tabular", "example"),
)
