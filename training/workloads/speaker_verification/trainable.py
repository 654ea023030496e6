"""The speaker-verification workload's heavy half (training environment): ingestion with speakers as labels, the two
embedding models as speaker classifiers, and their readers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from training import storage
from training.settings import RunSpecError
from training.speech import speech_commands as layout
from training.speech.corpus_settings import held_out_families
from training.speech.corpus_source import corpus_source
from training.speech.feature_records import load_shard, load_split
from training.workload_definition import Trainable
from training.workloads.speaker_verification import MODEL_A, MODEL_B, SPOTTER

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

# Additive angular margin softmax: scale 30, margin ramped 0 → 0.2 over the first MARGIN_RAMP_EPOCHS epochs.
MARGIN_RAMP_EPOCHS = 4


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Synthesise the corpus when the source is 'synthetic', then label its clips by speaker, make the speaker sets
    and trial lists and publish them (training.workloads.speaker_verification.speaker_clips)."""
    from training.workloads.speaker_verification import speaker_clips

    source = corpus_source(spec)  # the synthetic corpus is shared, synthesised once per recipe
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
    if spec.transfer_stage == SPOTTER:
        return spotter_trainable(spec)
    from training.workloads.speaker_verification.transfer import margin_epoch_offset, stage_model

    speakers = int(clips["training_classes"])
    loss_holder: dict[str, Any] = {}
    margin_offset = margin_epoch_offset(spec)

    def build_model() -> Any:
        from training.speech.audio.features import feature_shape
        from training.workloads.speaker_verification.speaker_embedding import densenet_bilstm_embedder, tdnn_embedder

        if spec.transfer_stage:
            return stage_model(spec, speakers)
        build = densenet_bilstm_embedder if spec.embedding_model == MODEL_A else tdnn_embedder
        return build(feature_shape(spec.features), num_speakers=speakers)

    def make_loss() -> Any:
        from training.workloads.speaker_verification.angular_margin import AdditiveAngularMarginLoss

        if "loss" not in loss_holder:  # one per process: begin_epoch ramps the margin of the loss being trained
            loss_holder["loss"] = AdditiveAngularMarginLoss(margin=0.0)
        return loss_holder["loss"]

    def begin_epoch(epoch: int) -> None:
        from training.workloads.speaker_verification.angular_margin import ramped_margin

        make_loss().set_margin(ramped_margin(epoch + margin_offset, ramp_epochs=MARGIN_RAMP_EPOCHS))

    return Trainable(name=spec.workload, num_classes=speakers, build_model=build_model,
                     load_shard=load_shard, load_split=load_split,
                     class_names=tuple(clips["class_names"][:speakers]), loss=make_loss, begin_epoch=begin_epoch,
                     epoch_metrics=development_eer(spec))


def development_eer(spec: RunSpec) -> Any:
    """``epoch_metrics``: ``dev_eer``, the EER of raw cosine scores on every sv_dev trial (enrollment as in the
    evaluation, no normalisation) — the verification measure of the training clock, for time-to-EER and the
    learning curves. The sv_dev features and trials are read on the first call (rank 0 only, under Horovod)."""
    import numpy as np

    loaded: dict[str, Any] = {}

    def measure(model: Any) -> dict[str, float]:
        from training.datasets import image_records
        from training.strategies.evaluation_clock import model_inputs
        from training.workloads.speaker_verification.report import raw_cosine_eer
        from training.workloads.speaker_verification.speaker_clips import read_trials
        from training.workloads.speaker_verification.speaker_embedding import embedding_model

        if not loaded:
            batch = image_records.read_split(spec.augmented_uri(), "sv_dev")
            originals = batch.copy == 0
            trials = read_trials(spec.raw_uri(), "sv_dev")
            labels = trials.label[trials.condition("all")]
            loaded.update(index=batch.index[originals], images=batch.images[originals], trials=trials,
                          measurable=bool(labels.any() and not labels.all()))
            if not set(np.concatenate([trials.test_clip, *trials.enrollment.values()]).tolist()) <= set(
                    loaded["index"].tolist()):
                raise storage.DatasetError(f"{spec.augmented_uri()}: the sv_dev split lacks clips its trials name")
        if not loaded["measurable"]:  # a corpus too small for targets and non-targets among its sv_dev trials
            return {}
        embedder = embedding_model(model)
        index, images = loaded["index"], loaded["images"]
        embeddings = np.zeros((int(index.max()) + 1, embedder.output_shape[-1]), np.float32)
        for start in range(0, len(index), 256):
            embeddings[index[start:start + 256]] = embedder(model_inputs(images[start:start + 256]),
                                                            training=False).numpy()
        return {"dev_eer": raw_cosine_eer(embeddings, loaded["trials"])}

    return measure


def spotter_trainable(spec: RunSpec) -> Trainable:
    """A keyword spotter (the DenseNet-BiLSTM of kws_densenet_bilstm) on the same shards, each clip labelled by its
    word instead of its speaker: the first stage of model A's transfer, trained on sv_train speakers only."""
    import numpy as np

    from training import sharding
    from training.datasets import image_records
    from training.workloads.speaker_verification.speaker_clips import read_clip_table

    clips, _ = read_clip_table(spec.raw_uri())
    words = sorted(set(clips.word.tolist()))
    word_of_clip = np.array([words.index(word) for word in clips.word], np.int32)

    def by_word(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
        return batch.images, word_of_clip[batch.index]

    def build_model() -> Any:
        from training.speech.audio.features import feature_shape
        from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

        return densenet_bilstm(feature_shape(spec.features), len(words))

    return Trainable(name=spec.workload, num_classes=len(words), build_model=build_model,
                     load_shard=lambda shards, rank, workers: by_word(sharding.read_worker_images(shards, rank,
                                                                                                  workers)),
                     load_split=lambda dataset, split: by_word(image_records.read_split(dataset, split)),
                     class_names=tuple(words))
