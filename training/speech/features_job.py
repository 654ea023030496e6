"""Spark job (step ``features``): keyword-spotting features (log-mel or MFCC, tf.signal) of every clip, plus
``augment_copies`` augmented copies of every training clip (random time shift, background noise at a random SNR);
validation and test are never augmented.

    spark-submit training/speech/features_job.py --workload kws_densenet_bilstm --features log_mel --augment-copies 2
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from training import storage
from training.console import step
from training.jobs.spark_records import (
    normalise_part_names,
    spark_image_schema,
    spark_label_type,
    split_statistics,
)
from training.speech import feature_records
from training.speech import ingest as speech_ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from training.config import RunSpec

log = logging.getLogger(__name__)

SPARK_CLIP_SCHEMA = "index long, label {label}, word string, speaker string, path string, audio binary"
FEATURE_BLOCK = 256  # clips per tf.signal call: large enough to amortise the call, small enough for the cache


@functools.lru_cache(maxsize=4)
def _noises(dataset: str) -> tuple[np.ndarray, ...]:
    """The background noises, read once per Python worker."""
    return tuple(speech_ingest.read_noises(dataset))


def _single_threaded_tensorflow() -> None:
    """Each Spark task is one core's worth of work: TensorFlow must not spread over the others."""
    from training.strategies.placement import configure_tensorflow_threads

    configure_tensorflow_threads(1)


def feature_record_batches(
    batches: Iterator[pa.RecordBatch], source: str, kind: str, copies: int, seed: int,
    max_shift_ms: float, snr_db: tuple[float, float], noise_probability: float, num_classes: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """For each batch of clips, yield the features of the originals, then of each augmented copy."""
    from training.datasets.image_records import binary_column, label_type, pixels_of
    from training.speech.audio.features import compute_features
    from training.speech.augment.audio import augment_clips

    _single_threaded_tensorflow()
    noises = _noises(source) if copies else ()
    for batch in batches:
        audio = pixels_of(batch.column("audio"), (1, speech_ingest.CLIP_SAMPLES), "<i2")
        audio = audio.reshape(-1, speech_ingest.CLIP_SAMPLES).astype(np.int16)
        index = batch.column("index").to_numpy().astype(np.int64)
        labels = batch.column("label").to_numpy()
        for copy_number in range(copies + 1):
            copy = np.full(len(index), copy_number, np.int16)
            clips = audio if copy_number == 0 else augment_clips(
                audio, index, copy, seed, noises, max_shift_ms=max_shift_ms, snr_db=snr_db,
                noise_probability=noise_probability)
            features = compute_features(clips, kind, batch_size=FEATURE_BLOCK).astype(feature_records.FEATURE_DTYPE)
            yield pa.RecordBatch.from_arrays(
                [pa.array(index, pa.int64()), pa.array(copy, pa.int16()), pa.array(labels, label_type(num_classes)),
                 binary_column(features)],
                names=["index", "copy", "label", "image"],
            )


def features_dataset(
    spark: SparkSession,
    source: str,
    destination: str,
    kind: str = "log_mel",
    copies: int = 2,
    seed: int = 0,
    overwrite: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Publish the features of ``source``'s clips (and augmented training copies) at ``destination``."""
    from training.speech.audio.features import FEATURE_KINDS, feature_shape
    from training.speech.augment import audio as audio_augment

    if kind not in FEATURE_KINDS:
        raise ValueError(f"features must be one of {', '.join(FEATURE_KINDS)}, got {kind!r}")
    max_shift_ms, snr_db = audio_augment.DEFAULT_MAX_SHIFT_MS, audio_augment.DEFAULT_SNR_DB
    noise_probability = audio_augment.DEFAULT_NOISE_PROBABILITY
    audio_augment.validate_parameters(max_shift_ms, snr_db, noise_probability, seed=seed, copies=copies)
    source_manifest = storage.require_manifest(source, speech_ingest.DATASET_KIND)
    if copies and not source_manifest["noise_files"]:
        log.warning("%s has no background noise: augmented copies get the time shift only", source)
        noise_probability = 0.0
    augmentation = {"method": "time shift + background noise", "copies": copies, "max_shift_ms": max_shift_ms,
                    "snr_db": list(snr_db), "noise_probability": noise_probability, "seed": seed}
    recipe = {"source_data_version": source_manifest["data_version"], "features": kind, **augmentation}
    num_classes = len(source_manifest["class_names"])

    def write(staging: storage.Location) -> dict[str, Any]:
        partitions = max(2, spark.sparkContext.defaultParallelism * 2)
        splits = {}
        for split in source_manifest["splits"]:  # train, validation, test (+ the non-keyword and open-set splits)
            split_copies = copies if split == "train" else 0
            transform = functools.partial(
                feature_record_batches, source=storage.to_uri(source), kind=kind, copies=split_copies, seed=seed,
                max_shift_ms=max_shift_ms, snr_db=snr_db, noise_probability=noise_probability,
                num_classes=num_classes)
            clip_schema = SPARK_CLIP_SCHEMA.format(label=spark_label_type(num_classes))
            clips = spark.read.schema(clip_schema).parquet(storage.join(source, split))
            # Ranges of the index: every core gets work and the partitions are the same on every run.
            clips = clips.repartitionByRange(partitions, "index").sortWithinPartitions("index")
            rows = source_manifest["splits"][split]["rows"]
            with step(log, f"{kind} features of {rows} {split} clips × {split_copies + 1}"):
                clips.mapInArrow(transform, spark_image_schema(num_classes)).write.mode("error").parquet(
                    storage.join(staging.uri, split))
                normalise_part_names(staging, split)
            splits[split] = split_statistics(spark.read.parquet(storage.join(staging.uri, split)), num_classes)
        _write_preview(staging, source, kind, augmentation)
        return {
            "source": storage.to_uri(source),
            "features": kind,
            "image_shape": list(feature_shape(kind)),
            "image_dtype": feature_records.FEATURE_DTYPE,
            "class_names": source_manifest["class_names"],
            "task": source_manifest["task"],
            "splits": splits,
            "augmentation": augmentation,
        }

    return storage.publish(destination, feature_records.DATASET_KIND, recipe, write, overwrite=overwrite)


def _write_preview(staging: storage.Location, source: str, kind: str, augmentation: dict[str, Any]) -> None:
    """preview.png: a few training clips' features beside their first augmented copy (test clips for an
    evaluation-only corpus, which has no training split)."""
    from training.evaluation.figures import feature_maps_png
    from training.speech.audio.features import compute_features
    from training.speech.augment.audio import augment_clips

    splits = storage.require_manifest(source, speech_ingest.DATASET_KIND)["splits"]
    audio, table = speech_ingest.read_clips(source, next(split for split in ("train", "test", "validation")
                                                         if splits[split]["rows"]))
    count = min(4, len(audio))
    index = table.column("index").to_numpy()[:count].astype(np.int64)
    originals = audio[:count]
    noises = speech_ingest.read_noises(source)
    augmented = augment_clips(originals, index, np.ones(count, np.int16), augmentation["seed"], noises,
                              max_shift_ms=augmentation["max_shift_ms"], snr_db=tuple(augmentation["snr_db"]),
                              noise_probability=augmentation["noise_probability"]) if noises else originals
    words = table.column("word").to_pylist()[:count]
    png = feature_maps_png(compute_features(originals, kind), compute_features(augmented, kind), words, kind)
    with staging.fs.open(f"{staging.path}/preview.png", "wb") as handle:
        handle.write(png)


def run_step(spec: RunSpec, master: str | None = None, overwrite: bool = False) -> str:
    """The pipeline step: features of the run's clips; returns the published URI."""
    from training.jobs.spark_session import LazySparkSession

    storage.require_manifest(spec.raw_uri(), speech_ingest.DATASET_KIND)  # before the JVM starts
    spark = LazySparkSession("cloudburst-features", master, spec)  # started only if there is work
    manifest, created = features_dataset(spark, spec.raw_uri(), spec.augmented_uri(), spec.features,
                                         spec.augment_copies, spec.seed, overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    splits = manifest["splits"]
    log.info("%s %s (train %d, validation %d, test %d rows of %s, data_version %s)", verb, manifest["uri"],
             splits["train"]["rows"], splits["validation"]["rows"], splits["test"]["rows"],
             "×".join(map(str, manifest["image_shape"])), manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=True, argv=argv)


if __name__ == "__main__":
    # Under spark-submit this file is __main__; run the imported module instead, so Spark's workers find its
    # functions (the cached noise reader above all) by their module name.
    from training.speech import features_job as features_module

    features_module.main()
