"""What the Airflow environment and the training environment agree on: step names, job entry points, the files a
run directory holds, the dataset kinds and the strategies' names. Standard library only — both environments import
it, and a name changed here changes on both sides at once.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Pipeline steps, in the order a workload may chain them. Each runs its workload's job module for it
# (WorkloadDefinition.job_module: its own, named in step_jobs, or training.jobs.<step>): Spark steps are
# spark-submitted as that module's file, the others run as ``python -m <module>`` in the training environment.
INGEST, AUGMENT, FEATURES, SHARD, TRAIN, EVALUATE = "ingest", "augment", "features", "shard", "train", "evaluate"
# Speaker verification's steps after training: embeddings of every clip, then the fused system.
SCORE, FUSE = "score", "fuse"
STEPS = (INGEST, AUGMENT, FEATURES, SHARD, TRAIN, SCORE, FUSE, EVALUATE)
SPARK_STEPS = frozenset({AUGMENT, FEATURES, SHARD, TRAIN})
# Steps with no generic job: a workload that has one names its module (WorkloadDefinition.step_jobs) — the speech
# workloads' features (training.speech.features_job), speaker verification's score and fuse.
WORKLOAD_OWNED_STEPS = frozenset({FEATURES, SCORE, FUSE})


def job_module(step: str) -> str:
    """The generic module that runs ``step``: every job takes the run specification's flags (see training.config)."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
    if step in WORKLOAD_OWNED_STEPS:
        raise ValueError(f"step {step!r} has no generic job: a workload that has it names its module in "
                         "WorkloadDefinition.step_jobs")
    return f"training.jobs.{step}"


def job_path(step: str) -> Path:
    """Where a step's generic job file stands in the tree, not looked up (a workload may have none for the step:
    MNIST's augment job is its own): only a placeholder for a task whose workload is known when it runs, a study's,
    which then submits its workload's ``job_file``."""
    return REPO_ROOT.joinpath(*job_module(step).split(".")).with_suffix(".py")


def module_file(module: str) -> Path:
    """The file of ``module`` (spark-submit runs a file, not a module), found as ``python -m`` finds it: only its
    parent packages are imported — a workload's package ``__init__`` is standard library only."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except ImportError as error:
        raise ValueError(f"job module {module!r}: its package does not import here ({error})") from error
    if found is None or not found.origin or not found.origin.endswith(".py"):
        raise ValueError(f"job module {module!r}: no Python file for it on this environment's path (is its "
                         "package installed, or on PYTHONPATH?)")
    return Path(found.origin)


# A run directory (<data root>/runs/<workload>/<run name>/) holds these; the Airflow side reads the last two.
RUN_SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
EVALUATION_FILE = "evaluation.json"
# Beside a dataset: every clip or file ingestion skipped, and why.
INGEST_REPORT_FILE = "ingest_report.json"

# Every dataset a strategy trains on has these splits. Validation is what training measures as it goes (val_*
# metrics, time to target, the learning curves) and what settings are chosen on; the test split is read once, by
# the evaluate step, at the end.
TRAIN_SPLIT, VALIDATION_SPLIT, TEST_SPLIT = "train", "validation", "test"
EVALUATION_SPLITS = (VALIDATION_SPLIT, TEST_SPLIT)

# Dataset kinds, as written in each dataset's manifest.
MNIST_IMAGES = "mnist-images"
IMAGE_SHARDS = "image-shards"
# Distribution strategies, by name: the ``strategy`` setting's choices. Each one declares its rules (checks, the
# settings it reads, its communication for the cost model, the class that trains it) in training/strategy_rules.py.
HOROVOD, DOWNPOUR, AVERAGING = "horovod", "downpour", "averaging"
STRATEGIES = (HOROVOD, DOWNPOUR, AVERAGING)
# The speech workloads' own names (clips, features, layouts, the corpus' generator) are in training.speech.constants.
