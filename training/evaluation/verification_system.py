"""A trained verification system on disk, and verifying a voice with it (``cloudburst verify``).

A system is what scoring needs besides the audio: each embedding model (input features → embedding), the feature
kind it reads, its cohort (one vector per training speaker, for S-norm), and the fusion that turns the models'
normalised scores into one calibrated log-likelihood ratio (for a single model: its calibration). It is published
atomically like a dataset (models as ``.keras`` files, the rest in the manifest), so a half-written system is never
loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training import storage
from training.evaluation import scoring, verification

SYSTEM_KIND = "speaker_verification_system"
SYSTEM_FORMAT = 1
COHORT_FILE = "cohort-{name}.npy"
MODEL_FILE = "embedder-{name}.keras"


@dataclass(frozen=True)
class VerificationSystem:
    embedders: Mapping[str, Any]  # name → Keras model from features to the embedding
    features: Mapping[str, str]  # name → feature kind (training.audio.features)
    cohorts: Mapping[str, np.ndarray]  # name → (speakers, dim) cohort vectors
    fusion: scoring.LinearFusion  # normalised scores in ``names`` order → LLR
    names: tuple[str, ...]
    cohort_top: int | None = None
    thresholds: Mapping[str, float] | None = None  # reported operating points on the LLR scale (e.g. eer_all)


def save_system(destination: str, system: VerificationSystem, recipe: Mapping[str, Any],
                overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Publish ``system`` at ``destination`` (a local directory: Keras writes local files)."""
    if set(system.names) != set(system.embedders) or set(system.names) != set(system.cohorts) \
            or set(system.names) != set(system.features):
        raise ValueError("a system needs an embedder, a feature kind and a cohort for every model name")
    for name in system.names:  # embedders, not whole speaker classifiers: scoring compares embeddings
        if system.embedders[name].output_shape[-1] != np.shape(system.cohorts[name])[-1]:
            raise ValueError(f"{name}: the embedder's output ({system.embedders[name].output_shape[-1]}) and its "
                             f"cohort ({np.shape(system.cohorts[name])[-1]}) differ in size; save "
                             "speaker_embedding.embedding_model(classifier), not the classifier")
    if len(system.fusion.weights) != len(system.names):
        raise ValueError(f"the fusion has {len(system.fusion.weights)} weights for {len(system.names)} models")

    def write(staging: storage.Location) -> dict[str, Any]:
        root = Path(staging.path)
        root.mkdir(parents=True, exist_ok=True)
        for name in system.names:
            system.embedders[name].save(root / MODEL_FILE.format(name=name))
            np.save(root / COHORT_FILE.format(name=name), np.asarray(system.cohorts[name], np.float32))
        return {"system_format": SYSTEM_FORMAT, "models": list(system.names), "features": dict(system.features),
                "fusion": system.fusion.to_mapping(), "cohort_top": system.cohort_top,
                "thresholds": dict(system.thresholds or {})}

    if not storage.to_uri(destination).startswith("file://"):
        raise ValueError(f"{destination}: a verification system is saved to a local directory")
    return storage.publish(destination, SYSTEM_KIND, dict(recipe), write, overwrite=overwrite)


def load_system(source: str) -> VerificationSystem:
    """A system saved by :func:`save_system`; a clear error for anything else."""
    import tensorflow as tf

    import training.models.speaker_embedding  # noqa: F401  (registers the custom layers for load_model)

    if storage.read_manifest(source) is None:
        raise storage.DatasetError(f"{source}: not a saved verification system (no {storage.MANIFEST_NAME}); "
                                   "`make bench-sv` saves one under var/bench/speaker-verification/system")
    manifest = storage.require_manifest(source, SYSTEM_KIND)
    if manifest.get("system_format") != SYSTEM_FORMAT:
        raise storage.DatasetError(f"{source}: system format {manifest.get('system_format')!r}, this version reads "
                                   f"{SYSTEM_FORMAT}")
    root = Path(storage.resolve(source).path)
    names = tuple(manifest["models"])
    fusion = manifest["fusion"]
    return VerificationSystem(
        embedders={name: tf.keras.models.load_model(root / MODEL_FILE.format(name=name), compile=False)
                   for name in names},
        features=dict(manifest["features"]),
        cohorts={name: np.load(root / COHORT_FILE.format(name=name)) for name in names},
        fusion=scoring.LinearFusion(tuple(fusion["weights"]), float(fusion["offset"]), float(fusion["prior"])),
        names=names, cohort_top=manifest.get("cohort_top"), thresholds=manifest.get("thresholds") or {})


def read_clip(path: str | Path, resample: bool = False) -> np.ndarray:
    """A WAV file checked as ingestion checks a clip (mono 16-bit PCM, 16 kHz unless ``resample``), fitted to
    1 s; a ValueError naming the file and the reason otherwise."""
    from training.datasets import speech_commands as layout
    from training.datasets import speech_ingest

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        samples, _ = speech_ingest.decode_pcm(data, resample)
    except layout.InvalidClipError as error:
        raise ValueError(f"{path}: {error}") from None
    if not np.any(samples):
        raise ValueError(f"{path}: holds only silence")
    return speech_ingest.fit_to_clip(samples)


@dataclass(frozen=True)
class Decision:
    scores: dict[str, float]  # model → S-norm score
    llr: float
    threshold: float
    p_target: float
    accepted: bool


def verify(system: VerificationSystem, enrollment: Sequence[np.ndarray], test: np.ndarray,
           p_target: float = 0.01) -> Decision:
    """Enroll a speaker from its clips (int16, 1 s each) and decide whether ``test`` is the same speaker: each
    model's cosine score S-normalised against its cohort, fused to an LLR, accepted at the Bayes threshold of
    ``p_target`` (C_miss = C_fa = 1)."""
    from training.audio.features import compute_features

    if not enrollment:
        raise ValueError("enrollment needs at least one clip")
    threshold = verification.bayes_threshold(p_target)
    clips = np.stack([*enrollment, test]).astype(np.int16)
    scores: dict[str, float] = {}
    for name in system.names:
        features = compute_features(clips, system.features[name]).astype(np.float32)
        embeddings = system.embedders[name].predict(features, batch_size=64, verbose=0)
        model = scoring.enroll(embeddings[:-1])[None, :]
        tests = embeddings[-1:]
        raw = scoring.cosine_scores(model, tests, [0], [0])
        cohort = system.cohorts[name]
        top = None if system.cohort_top is None else min(system.cohort_top, len(cohort))
        normalised = scoring.symmetric_normalisation(raw, scoring.cohort_statistics(model, cohort, top),
                                                     scoring.cohort_statistics(tests, cohort, top), [0], [0])
        scores[name] = float(normalised[0])
    llr = float(system.fusion.llr(np.array([[scores[name] for name in system.names]]))[0])
    return Decision(scores, llr, threshold, p_target, llr >= threshold)
