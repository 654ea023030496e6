"""The keyword-spotting workload's heavy half (training environment): synthesis and ingestion, the model and its
input readers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from training import storage
from training.datasets import image_records
from training.speech.corpus_settings import held_out_families
from training.speech.corpus_source import corpus_source
from training.speech.feature_records import load_shard, load_split
from training.workload_definition import Trainable

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

def ingest(spec: RunSpec, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Synthesise the corpus when the source is 'synthetic', then check, split and label it into Parquet clips."""
    from training.speech import ingest as speech_ingest

    source = corpus_source(spec)
    mebibyte = 1024 * 1024
    return speech_ingest.ingest(source, spec.raw_uri(), spec.kws_task, spec.resample, spec.seed, spec.data_sha256,
                                overwrite, held_out_families(spec),
                                train_unknown_percentage=spec.train_unknown_percentage,
                                training_speakers=spec.training_speakers,
                                max_member_bytes=spec.archive_max_member_mb * mebibyte,
                                max_extracted_bytes=spec.archive_max_total_mb * mebibyte,
                                max_archive_members=spec.archive_max_members)


def trainable(spec: RunSpec) -> Trainable:
    """The classes are those the features dataset holds: the 35-word task on v0.01 (30 words) has 30, not 35."""
    from training.speech.audio.features import feature_shape
    from training.speech.augment.spectrogram import make_augmenter, parse_augmentations

    class_names = storage.require_manifest(spec.augmented_uri())["class_names"]

    def build_model() -> Any:
        from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

        return densenet_bilstm(feature_shape(spec.features), len(class_names))

    return Trainable(name=spec.workload, num_classes=len(class_names), build_model=build_model,
                     load_shard=load_shard, load_split=load_split, class_names=tuple(class_names),
                     augment_batch=make_augmenter(parse_augmentations(spec.online_augmentation), spec.features),
                     evaluate_further=lambda model, test_predictions: evaluate_keywords_and_families(
                         spec, model, test_predictions, class_names))


def evaluate_keywords_and_families(spec: RunSpec, model: Any, test_predictions: np.ndarray,
                                   class_names: list[str]) -> tuple[dict[str, float], dict[str, bytes]]:
    """Keyword false accepts over the test speakers' clips of open-set words (never trained on) and of the other
    non-keywords (trained on as _unknown_: the closed set), per keyword and, where the corpus records voice
    families, the open set's per family; test accuracy per voice family (and over held-out / training families).
    ``test_predictions`` are the evaluate step's, for the test split in load_split's order."""
    import json

    from training.speech import ingest as speech_ingest
    from training.strategies.evaluation_clock import class_probabilities
    from training.workloads.kws_densenet_bilstm.metrics import accuracy_by_group, false_accepts

    features_uri = spec.augmented_uri()
    splits = storage.require_manifest(features_uri)["splits"]
    clips = storage.require_manifest(spec.raw_uri(), speech_ingest.DATASET_KIND)
    metrics: dict[str, float] = {}
    report: dict[str, Any] = {}
    families = clips.get("voice_families") or {}
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # split → (softmax, labels): scored once, read twice
    for kind, split in (("open_set", speech_ingest.OPEN_SET_TEST_SPLIT),
                        ("closed_set", speech_ingest.NON_KEYWORD_TEST_SPLIT)):
        if not splits.get(split, {}).get("rows"):
            continue
        batch = image_records.read_split(features_uri, split)
        scores[split] = (class_probabilities(model, batch.images), batch.labels)
        predictions = np.argmax(scores[split][0], axis=1)
        rate, by_keyword = false_accepts(predictions, class_names)
        metrics[f"{kind}_false_accept_rate"] = rate
        metrics.update({f"{kind}_false_accepts_{keyword}": share for keyword, share in by_keyword.items()})
        report[f"{kind}_false_accepts"] = {"split": split, "clips": len(batch), "rate": rate, "by_keyword": by_keyword}
        if kind == "open_set" and families:
            _, table = speech_ingest.read_clips(spec.raw_uri(), split)
            speaker_of = dict(zip(table.column("index").to_pylist(), table.column("speaker").to_pylist(),
                                  strict=True))
            family_of = np.array([families.get(speaker_of[int(index)]) for index in batch.index], object)
            by_family = {family: false_accepts(predictions[family_of == family], class_names)[0]
                         for family in sorted(set(family_of) - {None})}
            metrics.update({f"open_set_false_accept_rate_family_{family}": rate
                            for family, rate in by_family.items()})
            report["open_set_false_accepts"]["by_family"] = by_family
    if families:
        batch = image_records.read_split(features_uri, "test")
        _, table = speech_ingest.read_clips(spec.raw_uri(), "test")
        speaker_of = dict(zip(table.column("index").to_pylist(), table.column("speaker").to_pylist(), strict=True))
        family_of = [families.get(speaker_of[int(index)]) for index in batch.index]
        by_family = accuracy_by_group(batch.labels, test_predictions, family_of)  # same rows, same order
        metrics.update({f"test_accuracy_family_{family}": row["accuracy"] for family, row in by_family.items()})
        held_out = tuple(clips.get("held_out_families") or ())
        kinds = [None if family is None else
                 ("held_out_families" if speech_ingest.is_held_out(family, held_out) else "training_families")
                 for family in family_of]
        by_kind = accuracy_by_group(batch.labels, test_predictions, kinds)
        metrics.update({f"test_accuracy_{kind}": row["accuracy"] for kind, row in by_kind.items()})
        report |= {"held_out_families": list(held_out), "accuracy_by_family": by_family,
                   "accuracy_by_kind_of_family": by_kind}
    artifacts = {}
    if splits.get(speech_ingest.OPEN_SET_VALIDATION_SPLIT, {}).get("rows"):
        threshold_metrics, report["keyword_threshold"], artifacts["keyword_threshold.png"] = keyword_operating_point(
            spec, model, class_names, scores)
        metrics |= threshold_metrics
    if report:
        artifacts["keyword_evaluation.json"] = json.dumps(report, indent=2).encode()
    return metrics, artifacts


def keyword_operating_point(spec: RunSpec, model: Any, class_names: list[str],
                            scores: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[dict[str, float], dict, bytes]:
    """The keyword threshold chosen on validation for ``open_set_false_accept_target`` % open-set false accepts
    (the validation speakers' clips of words never trained on), and the test figures at it: (metrics, report,
    the validation curve as a PNG). The test split is only scored at the chosen threshold. ``scores`` holds the
    (softmax, labels) of splits already scored (the test open and closed sets); the others are scored here."""
    from training.evaluation.figures import keyword_threshold_png
    from training.speech import ingest as speech_ingest
    from training.strategies.evaluation_clock import class_probabilities
    from training.workloads.kws_densenet_bilstm.metrics import (
        false_accepts,
        keyword_threshold,
        threshold_curve,
        thresholded_predictions,
    )

    features_uri = spec.augmented_uri()
    for split in ("validation", speech_ingest.OPEN_SET_VALIDATION_SPLIT, "test", speech_ingest.OPEN_SET_TEST_SPLIT,
                  speech_ingest.NON_KEYWORD_TEST_SPLIT):
        if split not in scores:
            batch = image_records.read_split(features_uri, split)
            scores[split] = (class_probabilities(model, batch.images), batch.labels)
    threshold = keyword_threshold(scores[speech_ingest.OPEN_SET_VALIDATION_SPLIT][0], class_names,
                                  spec.open_set_false_accept_target / 100)

    def at_threshold(split: str) -> np.ndarray:
        return thresholded_predictions(scores[split][0], class_names, threshold)

    metrics = {
        "keyword_threshold": threshold,
        "validation_open_set_false_accept_rate": false_accepts(
            thresholded_predictions(scores[speech_ingest.OPEN_SET_VALIDATION_SPLIT][0], class_names, 0.0),
            class_names)[0],
        "validation_open_set_false_accept_rate_at_threshold": false_accepts(
            at_threshold(speech_ingest.OPEN_SET_VALIDATION_SPLIT), class_names)[0],
        "validation_accuracy_at_threshold": float(np.mean(at_threshold("validation") == scores["validation"][1])),
        "test_accuracy_at_threshold": float(np.mean(at_threshold("test") == scores["test"][1])),
        "open_set_false_accept_rate_at_threshold": false_accepts(at_threshold(speech_ingest.OPEN_SET_TEST_SPLIT),
                                                                 class_names)[0],
    }
    if len(scores[speech_ingest.NON_KEYWORD_TEST_SPLIT][1]):
        metrics["closed_set_false_accept_rate_at_threshold"] = false_accepts(
            at_threshold(speech_ingest.NON_KEYWORD_TEST_SPLIT), class_names)[0]
    curve = threshold_curve(*scores["validation"], scores[speech_ingest.OPEN_SET_VALIDATION_SPLIT][0], class_names)
    report = {"target": spec.open_set_false_accept_target / 100, "chosen_on": "validation", **metrics,
              "validation_curve": curve}
    return metrics, report, keyword_threshold_png(curve, metrics, spec.open_set_false_accept_target / 100)

