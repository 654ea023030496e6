"""The keyword-spotting workload's heavy half (training environment): synthesis and ingestion, the model and its
input readers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training import sharding, storage
from training.datasets import image_records
from training.workloads.base import Trainable
from training.workloads.kws_densenet_bilstm import SYNTHETIC_SOURCE
from training.workloads.mnist_elastic_cnn.trainable import adam

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

SYNTHETIC_REPETITIONS = 2  # utterances of each keyword per synthetic speaker


def synthetic_corpus_dir(data_root: str, speakers: int, seed: int) -> Path:
    """Where the synthetic corpus for a data root lives: beside the datasets when they are local files (so tests
    and other roots stay apart), else under the checkout's var/ (the TTS engines write local files)."""
    from training.datasets.speech_synthesis import default_corpus_dir

    default = default_corpus_dir(speakers, SYNTHETIC_REPETITIONS, seed)
    if data_root.startswith("file://"):
        return Path(storage.resolve(data_root).path) / "corpora" / default.name
    return default


def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Synthesise the corpus when the source is 'synthetic', then check, split and label it into Parquet clips."""
    from training.datasets import speech_ingest

    source = spec.resolved_data_source()
    if source == SYNTHETIC_SOURCE:
        from training.datasets.speech_synthesis import synthesize_corpus

        corpus = synthetic_corpus_dir(spec.resolved_data_root(), spec.speakers, spec.seed)
        report = synthesize_corpus(corpus, speakers=spec.speakers, repetitions=SYNTHETIC_REPETITIONS, seed=spec.seed)
        log.info("synthetic corpus %s: %d utterances of %d speakers", corpus, report["utterances"], report["speakers"])
        source = str(corpus)
    mebibyte = 1024 * 1024
    return speech_ingest.ingest(source, spec.raw_uri(), spec.kws_task, spec.resample, spec.seed, spec.data_sha256,
                                overwrite, max_member_bytes=spec.archive_max_member_mb * mebibyte,
                                max_extracted_bytes=spec.archive_max_total_mb * mebibyte,
                                max_archive_members=spec.archive_max_members)


def _features(batch: image_records.ImageBatch) -> tuple[np.ndarray, np.ndarray]:
    return batch.images, batch.labels.astype(np.int32)


def load_shard(shards_uri: str, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    return _features(sharding.read_worker_images(shards_uri, rank, workers))


def load_split(dataset_uri: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    return _features(image_records.read_split(dataset_uri, split))


def trainable(spec: RunSpec) -> Trainable:
    """The classes are those the features dataset holds: the 35-word task on v0.01 (30 words) has 30, not 35."""
    from training.audio.features import feature_shape

    class_names = storage.require_manifest(spec.augmented_uri())["class_names"]

    def build_model() -> Any:
        from training.models.densenet_bilstm import densenet_bilstm

        return densenet_bilstm(feature_shape(spec.features), len(class_names))

    return Trainable(name=spec.workload, num_classes=len(class_names), build_model=build_model, make_optimizer=adam,
                     load_shard=load_shard, load_split=load_split, class_names=tuple(class_names))
