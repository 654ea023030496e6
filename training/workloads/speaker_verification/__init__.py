"""Speaker verification: two speaker-embedding models of similar size — A, the keyword spotter's DenseNet-BiLSTM
trunk on log-mel; B, an x-vector TDNN on MFCC — trained as speaker classifiers (additive angular margin softmax)
through any strategy, then scored, fused and evaluated on trials of speakers neither model heard.

ingest (speakers as labels, speaker sets, trial lists) → for each model: features → shard → train →
score (embeddings of every clip) → fuse (S-norm, calibration and logistic fusion trained on sv_dev) → evaluate
(EER, minDCF, Cllr, DET curves per model and fused, per condition, on sv_eval).

Standard library only; ingestion, the models and the readers are in :mod:`.trainable`, the steps after training in
:mod:`.score`, :mod:`.fuse` and :mod:`.evaluate`.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from training.contract import EVALUATE, FEATURES, FUSE, INGEST, SCORE, SHARD, TRAIN
from training.settings import DATA, TRAINING, RunSpecError, Setting
from training.workloads import kws_densenet_bilstm as keyword_spotting
from training.workloads.base import WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec

NAME = "speaker_verification"
MODEL_A, MODEL_B = "model_a", "model_b"
# Each embedding model and the features it reads: A, the DenseNet-BiLSTM trunk on log-mel; B, a TDNN on MFCC.
MODEL_FEATURES = {MODEL_A: "log_mel", MODEL_B: "mfcc"}
MODEL_TITLES = {MODEL_A: "A: DenseNet-BiLSTM on log-mel", MODEL_B: "B: x-vector TDNN on MFCC"}
ENROLLMENT_CHOICES = (1, 3, 5)

# The corpus settings are the keyword spotter's own, used as they are (same corpus, same checks).
_SHARED_WITH_KEYWORD_SPOTTING = ("data_sha256", "speakers", "resample", "archive_max_member_mb",
                                 "archive_max_total_mb", "archive_max_members", "held_out_families")
SETTINGS = (
    *(entry for entry in keyword_spotting.SETTINGS if entry.name in _SHARED_WITH_KEYWORD_SPOTTING),
    Setting("embedding_model", str, "", "Embedding model",
            f"Which speaker-embedding model a features/shard/train step works on: {MODEL_A} (log-mel features) or "
            f"{MODEL_B} (MFCC features); empty for the steps after training, which use both. The DAG trains both "
            "as parallel branches.", TRAINING, choices=("", MODEL_A, MODEL_B), optional=True, on_form=False),
    Setting("enrollment_utterances", int, 3, "Enrollment utterances",
            "Clips each trial speaker enrolls with (the mean of their L2-normalised embeddings); the evaluation "
            "also reports the fused system with the other choices. A speaker needs one clip more than this to be "
            "in the trials.", DATA, choices=ENROLLMENT_CHOICES),
    Setting("bootstrap_resamples", int, 200, "Bootstrap resamples",
            "Resamples of the evaluation speakers for the 95 % confidence intervals of EER and minDCF.", TRAINING,
            minimum=20, maximum=10_000),
)

# What `make demo-sv` trains with; bench/speaker_verification.py measured these models at 8 epochs, Adam 0.002,
# batch 64 (plain Keras): A reached 4.5 % and B 6.9 % EER on different-word trials of 300 speakers.
DEFAULTS = {"data_source": keyword_spotting.SYNTHETIC_SOURCE, "speakers": 300, "epochs": 8, "augment_copies": 0,
            "batch_size_per_worker": 64, "learning_rate": 0.002, "target_accuracy": 0.9,
            "evaluations_per_epoch": 1, "rounds_per_epoch": 2}


def clips_uri(spec: RunSpec) -> str:
    """Clips labelled by speaker, with their trial lists: ``…/speech_commands/<source>/speakers-enroll3`` (+
    ``-resampled``, + ``-heldout-<hash>`` when voice families are held out of training)."""
    suffix = "-resampled" if spec.resample else ""
    held_out = keyword_spotting.held_out_families(spec)
    if held_out:
        suffix += "-heldout-" + hashlib.sha1(",".join(held_out).encode()).hexdigest()[:8]
    root = spec.resolved_data_root().rstrip("/")
    return (f"{root}/speech_commands/{keyword_spotting.source_id(spec)}/speakers-enroll"
            f"{spec.enrollment_utterances}{suffix}")


def features_uri(spec: RunSpec) -> str:
    """Beside the clips, one per feature kind: ``speakers-enroll3`` becomes ``speakers-enroll3-mfcc-k0-seed0``."""
    return f"{clips_uri(spec)}-{spec.features}-k{spec.augment_copies}-seed{spec.seed}"


def check(spec: RunSpec) -> None:
    """An embedding model reads its own feature kind: anything else is refused before a job starts."""
    if spec.embedding_model and spec.features != MODEL_FEATURES[spec.embedding_model]:
        raise RunSpecError(f"embedding_model={spec.embedding_model!r} reads {MODEL_FEATURES[spec.embedding_model]} "
                           f"features, not features={spec.features!r}: give --features "
                           f"{MODEL_FEATURES[spec.embedding_model]} (the DAG sets both)")


DEFINITION = WorkloadDefinition(
    name=NAME,
    title="Speaker verification: embeddings A and B, fused",
    description="Speaker verification: ingest → (features → shard → train) × models A, B → score → fuse → evaluate",
    steps=(INGEST, FEATURES, SHARD, TRAIN, SCORE, FUSE, EVALUATE),
    raw_uri=clips_uri,
    train_uri=features_uri,
    ingest="training.workloads.speaker_verification.trainable:ingest",
    trainable="training.workloads.speaker_verification.trainable:trainable",
    default_source=keyword_spotting.SYNTHETIC_SOURCE,
    settings=SETTINGS,
    defaults=DEFAULTS,
    source_help="Speaker verification: 'synthetic' (a corpus of voices synthesised offline, the default), or a "
                "Speech Commands directory, .tar.gz, http(s) URL, or hdfs:// directory or archive; speakers are "
                "the labels.",
    check=check,
    check_source=keyword_spotting.check_source,
    assets={INGEST: ("speaker_clips", "x-cloudburst://datasets/speech_commands/speakers"),
            EVALUATE: ("speaker_verification_system", "x-cloudburst://models/speaker_verification")},
    tags=("speech", "speaker-verification"),
    step_jobs={SCORE: "training.workloads.speaker_verification.score",
               FUSE: "training.workloads.speaker_verification.fuse",
               EVALUATE: "training.workloads.speaker_verification.evaluate"},
    branch_setting="embedding_model",
    branches={model: {"features": features} for model, features in MODEL_FEATURES.items()},
    branch_steps=(FEATURES, SHARD, TRAIN),
)
