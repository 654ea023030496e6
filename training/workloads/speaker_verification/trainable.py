"""The speaker-verification workload's heavy half (training environment): ingestion with speakers as labels, the two
embedding models as speaker classifiers, and their readers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from training import storage
from training.datasets import speech_commands as layout
from training.settings import RunSpecError
from training.workloads.base import Trainable
from training.workloads.kws_densenet_bilstm import SYNTHETIC_SOURCE, held_out_families
from training.workloads.kws_densenet_bilstm.trainable import load_shard, load_split, synthetic_corpus_dir
from training.workloads.mnist_elastic_cnn.trainable import adam
from training.workloads.speaker_verification import MODEL_A, MODEL_B

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

# Additive angular margin softmax: scale 30, margin ramped 0 → 0.2 over the first MARGIN_RAMP_EPOCHS epochs.
MARGIN_RAMP_EPOCHS = 4


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Synthesise the corpus when the source is 'synthetic', then label its clips by speaker, make the speaker sets
    and trial lists and publish them (training.datasets.speaker_clips)."""
    from training.datasets import speaker_clips

    source = spec.resolved_data_source()
    if source == SYNTHETIC_SOURCE:
        from training.datasets.speech_synthesis import synthesize_corpus
        from training.workloads.kws_densenet_bilstm.trainable import SYNTHETIC_REPETITIONS

        corpus = synthetic_corpus_dir(spec.resolved_data_root(), spec.speakers, spec.seed)
        report = synthesize_corpus(corpus, speakers=spec.speakers, repetitions=SYNTHETIC_REPETITIONS, seed=spec.seed)
        log.info("synthetic corpus %s: %d utterances of %d speakers", corpus, report["utterances"], report["speakers"])
        source = str(corpus)
    mebibyte = 1024 * 1024
    limits = layout.ArchiveLimits(spec.archive_max_member_mb * mebibyte, spec.archive_max_total_mb * mebibyte,
                                  spec.archive_max_members)
    return speaker_clips.ingest(source, spec.raw_uri(), spec.enrollment_utterances, spec.seed, spec.resample,
                                spec.data_sha256, overwrite, held_out_families(spec), limits)


def trainable(spec: RunSpec) -> Trainable:
    """One embedding model (the run's ``embedding_model``) as a classifier of the sv_train speakers."""
    if not spec.embedding_model:
        raise RunSpecError(f"workload {spec.workload} trains one embedding model at a time: give embedding_model "
                           f"({MODEL_A} or {MODEL_B}) with its features (the DAG runs both as branches)")
    clips = storage.require_manifest(spec.raw_uri())
    if "training_classes" not in clips:
        raise RunSpecError(f"{spec.raw_uri()}: not a speaker-labelled clips dataset (no training_classes); ingest "
                           f"it with the {spec.workload} workload")
    speakers = int(clips["training_classes"])
    loss_holder: dict[str, Any] = {}

    def build_model() -> Any:
        from training.audio.features import feature_shape
        from training.models.speaker_embedding import densenet_bilstm_embedder, tdnn_embedder

        build = densenet_bilstm_embedder if spec.embedding_model == MODEL_A else tdnn_embedder
        return build(feature_shape(spec.features), num_speakers=speakers)

    def make_loss() -> Any:
        from training.models.angular_margin import AdditiveAngularMarginLoss

        if "loss" not in loss_holder:  # one per process: begin_epoch ramps the margin of the loss being trained
            loss_holder["loss"] = AdditiveAngularMarginLoss(margin=0.0)
        return loss_holder["loss"]

    def begin_epoch(epoch: int) -> None:
        from training.models.angular_margin import ramped_margin

        make_loss().set_margin(ramped_margin(epoch, ramp_epochs=MARGIN_RAMP_EPOCHS))

    return Trainable(name=spec.workload, num_classes=speakers, build_model=build_model, make_optimizer=adam,
                     load_shard=load_shard, load_split=load_split,
                     class_names=tuple(clips["class_names"][:speakers]), loss=make_loss, begin_epoch=begin_epoch)
