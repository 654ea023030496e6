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
from training.settings import DATA, DATASET_SCHEMES, TRAINING, RunSpecError, Setting
from training.speech.constants import FEATURES_JOB, SPEAKER_CLIPS_LAYOUT
from training.speech.corpus_settings import (
    CORPUS_SETTINGS,
    SYNTHETIC_SOURCE,
    check_source,
    held_out_families,
    source_id,
)
from training.workload_definition import WorkloadDefinition
from training.workloads import kws_densenet_bilstm as keyword_spotting  # scheduled on its model (transfer_from)

if TYPE_CHECKING:
    from training.config import RunSpec

NAME = "speaker_verification"
SPEAKER_EMBEDDINGS = "speaker-embeddings"  # the score step's dataset kind
MODEL_A, MODEL_B = "model_a", "model_b"
# Each embedding model and the features it reads: A, the DenseNet-BiLSTM trunk on log-mel; B, a TDNN on MFCC.
MODEL_FEATURES = {MODEL_A: "log_mel", MODEL_B: "mfcc"}
MODEL_TITLES = {MODEL_A: "A: DenseNet-BiLSTM on log-mel", MODEL_B: "B: x-vector TDNN on MFCC"}
ENROLLMENT_CHOICES = (1, 3, 5)
# Transfer learning for model A, each stage its own run: a keyword spotter (only when transfer_from is 'auto' and
# none fits), the head with the transferred trunk frozen, then fine-tuning of the upper blocks.
SPOTTER, HEAD, FINE_TUNE = "spotter", "head", "fine_tune"
TRANSFER_STAGES = (SPOTTER, HEAD, FINE_TUNE)

SETTINGS = (
    *CORPUS_SETTINGS,  # the speech workloads' shared corpus settings (same corpus, same checks)
    Setting("embedding_model", str, "", "Embedding model",
            f"Which speaker-embedding model a features/shard/train step works on: {MODEL_A} (log-mel features) or "
            f"{MODEL_B} (MFCC features); empty for the steps after training, which use both. The DAG trains both "
            "as parallel branches.", TRAINING, choices=("", MODEL_A, MODEL_B), optional=True, on_form=False,
            empty_means="both models (the steps after training)"),
    Setting("enrollment_utterances", int, 3, "Enrollment utterances",
            "Clips each trial speaker enrolls with (the mean of their L2-normalised embeddings); the evaluation "
            "also reports the fused system with the other choices. A speaker needs one clip more than this to be "
            "in the trials.", DATA, choices=ENROLLMENT_CHOICES),
    Setting("transfer_from", str, "", "Model A: transfer from a trained trunk",
            "Start model A's trunk from a trained source: a speaker model A pretrained on a separate pool of "
            "speakers (its speaker_verification model_a run directory or MLflow run id; e.g. a run on the "
            "synthetic corpus of another seed, whose speakers are none of this corpus's — make bench-sv-transfer "
            "measures it), or a keyword spotter: 'auto' (the newest finished kws_densenet_bilstm run in this "
            "MLflow store on log-mel features that heard no sv_dev or sv_eval speaker — one trained with "
            "training_speakers=sv_train; when there is none, one is trained first on the sv_train clips with "
            "their words as labels), an MLflow run id or a keyword-spotting run directory (a run the keyword "
            "spotter's model asset triggers gets that run's directory). A source that heard an sv_dev or sv_eval "
            "speaker is refused. Empty: from scratch (the default). Two stages follow: the head alone with the "
            "source's layers frozen (transfer_head_epochs), then, at a quarter of the learning rate, every layer "
            "(from a speaker model) or the upper three trunk units (from a spotter).", TRAINING, optional=True,
            pattern=r"auto|[0-9a-f]{32}|(file://|hdfs://|/)[^\s]+", uri_schemes=DATASET_SCHEMES,
            pattern_help="must be 'auto', an MLflow run id (32 hexadecimal digits) or a run directory (an "
                         "absolute path, file:// or hdfs:// URI)", metavar="SOURCE", empty_means="from scratch",
            training_only=True),
    Setting("transfer_head_epochs", int, 2, "Transfer: head-only epochs",
            "With transfer_from: epochs of the first stage (trunk frozen); the rest of the epochs fine-tune.",
            TRAINING, minimum=1, maximum=1000, training_only=True),
    Setting("transfer_spotter_epochs", int, 4, "Transfer: keyword-spotter epochs",
            "With transfer_from 'auto' and no suitable keyword spotter yet: epochs of the one trained first.",
            TRAINING, minimum=1, maximum=1000, training_only=True),
    Setting("transfer_stage", str, "", "Transfer stage",
            "Set by the train step for each stage of a transfer (spotter, head, fine_tune); each stage is a run of "
            "its own below the model's run directory.", TRAINING, choices=("", *TRANSFER_STAGES), optional=True,
            on_form=False, internal=True, empty_means="not a stage of a transfer"),
    Setting("bootstrap_resamples", int, 200, "Bootstrap resamples",
            "Resamples of the evaluation speakers for the 95 % confidence intervals of EER and minDCF.", TRAINING,
            minimum=20, maximum=10_000, training_only=True),
)

# What `make demo-sv` trains with (300 speakers, 8 epochs, batch 64 per worker). Adam at 0.001 per worker: Horovod
# scales it by the workers, and at 0.002 (the plain-Keras bench's rate) the 1x2 run trained A at 0.004 and left it
# at 30 % speaker accuracy and 10.7 % EER where 1x1 reached 68 % and 5.4 % (make demo-sv, 2026-12-02).
DEFAULTS = {"data_source": SYNTHETIC_SOURCE, "speakers": 300, "epochs": 8, "augment_copies": 0,
            "batch_size_per_worker": 64, "learning_rate": 0.001, "target_accuracy": 0.9,
            "evaluations_per_epoch": 1, "rounds_per_epoch": 2}


def clips_uri(spec: RunSpec) -> str:
    """Clips labelled by speaker, with their trial lists and a validation split: ``…/speech_commands/<source>/
    speakers-layout3-enroll3`` (the layout's number: a dataset of an older layout keeps its name) (+
    ``-resampled``, + ``-heldout-<hash>`` when voice families are held out of training)."""
    suffix = "-resampled" if spec.resample else ""
    held_out = held_out_families(spec)
    if held_out:
        suffix += "-heldout-" + hashlib.sha1(",".join(held_out).encode()).hexdigest()[:8]
    root = spec.resolved_data_root().rstrip("/")
    return (f"{root}/speech_commands/{source_id(spec)}/speakers-layout{SPEAKER_CLIPS_LAYOUT}-enroll"
            f"{spec.enrollment_utterances}{suffix}")


def features_uri(spec: RunSpec) -> str:
    """Beside the clips, one per feature kind: ``speakers-layout3-enroll3`` becomes
    ``speakers-layout3-enroll3-mfcc-k0-seed0``."""
    return f"{clips_uri(spec)}-{spec.features}-k{spec.augment_copies}-seed{spec.seed}"


def check(spec: RunSpec) -> None:
    """An embedding model reads its own feature kind, and a transfer leaves epochs to fine-tune: anything else is
    refused before a job starts."""
    if spec.embedding_model and spec.features != MODEL_FEATURES[spec.embedding_model]:
        raise RunSpecError(f"embedding_model={spec.embedding_model!r} reads {MODEL_FEATURES[spec.embedding_model]} "
                           f"features, not features={spec.features!r}: give --features "
                           f"{MODEL_FEATURES[spec.embedding_model]} (the DAG sets both)")
    if spec.transfer_from and not spec.transfer_stage and spec.epochs <= spec.transfer_head_epochs:
        raise RunSpecError(f"epochs={spec.epochs}: with transfer_from, more than transfer_head_epochs="
                           f"{spec.transfer_head_epochs} (the head-only stage), so that some are left to fine-tune")
    if spec.transfer_stage and spec.embedding_model != MODEL_A:
        raise RunSpecError(f"transfer_stage={spec.transfer_stage!r}: only model A ({MODEL_A}) transfers a trunk")


DEFINITION = WorkloadDefinition(
    name=NAME,
    title="Speaker verification: embeddings A and B, fused",
    study_training_examples=30_000, study_seconds_per_example=0.004,
    description="Speaker verification: ingest → (features → shard → train) × models A, B → score → fuse → evaluate",
    steps=(INGEST, FEATURES, SHARD, TRAIN, SCORE, FUSE, EVALUATE),
    raw_uri=clips_uri,
    train_uri=features_uri,
    ingest="training.workloads.speaker_verification.trainable:ingest",
    trainable="training.workloads.speaker_verification.trainable:trainable",
    default_source=SYNTHETIC_SOURCE,
    settings=SETTINGS,
    defaults=DEFAULTS,
    source_help="Speaker verification: 'synthetic' (a corpus of voices synthesised offline, the default), or a "
                "Speech Commands directory, .tar.gz, http(s) URL, or hdfs:// directory or archive; speakers are "
                "the labels.",
    check=check,
    check_source=check_source,
    assets={INGEST: ("speaker_clips", "x-cloudburst://datasets/speech_commands/speakers"),
            EVALUATE: ("speaker_verification_system", "x-cloudburst://models/speaker_verification")},
    tags=("speech", "speaker-verification"),
    step_jobs={FEATURES: FEATURES_JOB,
               SCORE: "training.workloads.speaker_verification.score",
               FUSE: "training.workloads.speaker_verification.fuse",
               EVALUATE: "training.workloads.speaker_verification.evaluate_trials"},
    branch_setting="embedding_model",
    branches={model: {"features": features} for model, features in MODEL_FEATURES.items()},
    branch_steps=(FEATURES, SHARD, TRAIN),
    run_path_settings=("embedding_model", "transfer_stage"),
    training_stages="training.workloads.speaker_verification.transfer:training_stages",
    scheduled_on=keyword_spotting.DEFINITION.assets[TRAIN],
    scheduled_on_setting="transfer_from",
)
