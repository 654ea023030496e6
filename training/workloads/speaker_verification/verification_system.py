"""A trained verification system on disk, and verifying a voice with it (``cloudburst verify``).

A system is what scoring needs besides the audio: each embedding model (input features → embedding), the feature
kind it reads, its cohort (one vector per training speaker, for S-norm), and the fusion that turns the models'
normalised scores into one calibrated log-likelihood ratio (for a single model: its calibration). It is published
atomically like a dataset: each embedder as weights (training.models.model_files: rebuilt by this package's own
builders, so a system's files cannot run code), each cohort as a plain ``.npy``, the rest in the manifest with every
file's sha256. Loading checks everything before anything scores: the digests, that the files are exactly those the
manifest lists, finite fusion weights, and a directory that only its owner can change.
"""

from __future__ import annotations

import io
import math
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training import local_files, storage
from training.evaluation import scoring, verification
from training.models import model_files
from training.speech.constants import FEATURE_KINDS

SYSTEM_KIND = "speaker_verification_system"
SYSTEM_FORMAT = 2  # 1 held Keras files, which can carry code: refused
COHORT_FILE = "cohort-{name}.npy"
MODEL_FILE = "embedder-{name}.npz"
MODEL_NAME_PATTERN = r"[a-z0-9_]{1,40}"  # a model's name is part of its files' names
MAX_COHORT_BYTES = 256 * 2**20
MAX_CLIP_BYTES = 4 * 2**20  # about 2 min of 16 kHz 16-bit mono; verify scores the first second of a clip


class SavedSystemError(storage.DatasetError):
    """A saved verification system is missing, damaged, changed since it was published or inconsistent."""


@dataclass(frozen=True)
class VerificationSystem:
    embedders: Mapping[str, Any]  # name → Keras model from features to the embedding
    features: Mapping[str, str]  # name → feature kind (training.speech.audio.features)
    cohorts: Mapping[str, np.ndarray]  # name → (speakers, dim) cohort vectors
    fusion: scoring.LinearFusion  # normalised scores in ``names`` order → LLR
    names: tuple[str, ...]
    cohort_top: int | None = None
    thresholds: Mapping[str, float] | None = None  # reported operating points on the LLR scale (e.g. eer_all)


def save_system(destination: str, system: VerificationSystem, recipe: Mapping[str, Any],
                overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Publish ``system`` at ``destination`` (a local directory)."""
    if set(system.names) != set(system.embedders) or set(system.names) != set(system.cohorts) \
            or set(system.names) != set(system.features):
        raise ValueError("a system needs an embedder, a feature kind and a cohort for every model name")
    for name in system.names:  # embedders, not whole speaker classifiers: scoring compares embeddings
        if re.fullmatch(MODEL_NAME_PATTERN, name) is None:
            raise ValueError(f"model name {name!r}: must match {MODEL_NAME_PATTERN} (it names the model's files)")
        if system.embedders[name].output_shape[-1] != np.shape(system.cohorts[name])[-1]:
            raise ValueError(f"{name}: the embedder's output ({system.embedders[name].output_shape[-1]}) and its "
                             f"cohort ({np.shape(system.cohorts[name])[-1]}) differ in size; save "
                             "speaker_embedding.embedding_model(classifier), not the classifier")
    if len(system.fusion.weights) != len(system.names):
        raise ValueError(f"the fusion has {len(system.fusion.weights)} weights for {len(system.names)} models")

    def write(staging: storage.Location) -> dict[str, Any]:
        root = Path(staging.path)
        root.mkdir(parents=True, exist_ok=True)
        embedders = {}
        for name in system.names:
            embedders[name] = model_files.write_weights(system.embedders[name], root / MODEL_FILE.format(name=name))
            np.save(root / COHORT_FILE.format(name=name), np.asarray(system.cohorts[name], np.float32))
        return {"system_format": SYSTEM_FORMAT, "models": list(system.names), "features": dict(system.features),
                "embedders": embedders, "fusion": system.fusion.to_mapping(), "cohort_top": system.cohort_top,
                "thresholds": dict(system.thresholds or {})}

    if not storage.to_uri(destination).startswith("file://"):
        raise ValueError(f"{destination}: a verification system is saved to a local directory")
    return storage.publish(destination, SYSTEM_KIND, dict(recipe), write, overwrite=overwrite)


def load_system(source: str) -> VerificationSystem:
    """A system saved by :func:`save_system`, every file checked against the manifest; SavedSystemError naming the
    system and the file otherwise."""
    root = Path(storage.resolve(source).path)
    if not root.is_dir() or not (root / storage.MANIFEST_NAME).exists():
        raise SavedSystemError(f"{source}: not a saved verification system (no {storage.MANIFEST_NAME}); "
                               "`make bench-sv` saves one under var/bench/speaker-verification/system")
    _refuse_writable_by_others(root)
    try:
        manifest = storage.require_manifest(str(root), SYSTEM_KIND)
    except storage.DatasetError as error:
        raise SavedSystemError(str(error)) from None
    if type(manifest.get("system_format")) is not int or manifest["system_format"] != SYSTEM_FORMAT:
        raise SavedSystemError(f"{source}: system format {str(manifest.get('system_format'))[:20]!r}, this "
                               f"version reads {SYSTEM_FORMAT} (format 1 stored Keras files, which can carry code: "
                               "save the system again with this version)")
    names, features, fusion = _checked_contents(source, manifest)
    files = _checked_listing(root, source, manifest, names)
    embedders, cohorts = {}, {}
    for name in names:
        embedders[name] = _read_embedder(root, name, manifest["embedders"].get(name), files)
        cohorts[name] = _read_cohort(root, name, files, embedders[name].output_shape[-1])
    return VerificationSystem(embedders=embedders, features=features, cohorts=cohorts, fusion=fusion, names=names,
                              cohort_top=manifest.get("cohort_top"), thresholds=manifest.get("thresholds") or {})


def _refuse_writable_by_others(root: Path) -> None:
    """Like ssh with a key: a system anyone on the machine could have replaced is not trusted to decide."""
    for path in (root, *sorted(root.iterdir())):
        mode = path.lstat().st_mode
        if mode & stat.S_IWOTH and not stat.S_ISLNK(mode):
            raise SavedSystemError(f"{path}: writable by every user of this machine (mode "
                                   f"{stat.S_IMODE(mode):04o}), so anyone could have replaced the system's models; "
                                   "`chmod -R o-w` it if you trust it")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _checked_contents(source: str, manifest: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, str],
                                                                         scoring.LinearFusion]:
    """The manifest's model names, feature kinds and fusion, each checked: a system that cannot decide is refused
    here, not when it has scored a voice."""
    shown = f"{source}/{storage.MANIFEST_NAME}"
    models, features, fusion = manifest.get("models"), manifest.get("features"), manifest.get("fusion")
    if not isinstance(models, list) or not models or len(set(map(str, models))) != len(models) \
            or not all(isinstance(name, str) and re.fullmatch(MODEL_NAME_PATTERN, name) for name in models):
        raise SavedSystemError(f"{shown}: 'models' must list one or more distinct model names")
    for entry, value in (("features", features), ("embedders", manifest.get("embedders"))):
        if not isinstance(value, Mapping) or set(value) != set(models):
            raise SavedSystemError(f"{shown}: '{entry}' must have an entry for each model ({', '.join(models)}) and no "
                                   "other")
    if not all(kind in FEATURE_KINDS for kind in features.values()):
        raise SavedSystemError(f"{shown}: a feature kind is not one of {', '.join(FEATURE_KINDS)}")
    if not isinstance(fusion, Mapping) or not isinstance(fusion.get("weights"), list):
        raise SavedSystemError(f"{shown}: no 'fusion' with its weights")
    weights, offset, prior = fusion["weights"], fusion.get("offset"), fusion.get("prior")
    if len(weights) != len(models) or not all(map(_finite, [*weights, offset, prior])) or not 0 < prior < 1:
        raise SavedSystemError(f"{shown}: the fusion needs one finite weight per model, a finite offset and a prior "
                               "between 0 and 1")
    thresholds, top = manifest.get("thresholds") or {}, manifest.get("cohort_top")
    if not isinstance(thresholds, Mapping) or not all(map(_finite, thresholds.values())) \
            or not (top is None or (isinstance(top, int) and not isinstance(top, bool) and top >= 1)):
        raise SavedSystemError(f"{shown}: 'thresholds' must be finite numbers and 'cohort_top' empty or at least 1")
    return (tuple(models), {name: features[name] for name in models},
            scoring.LinearFusion(tuple(float(w) for w in weights), float(offset), float(prior)))


def _checked_listing(root: Path, source: str, manifest: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """The manifest's file digests, when they name exactly the files a system of these models has and the
    directory holds exactly those."""
    expected = {template.format(name=name) for name in names for template in (MODEL_FILE, COHORT_FILE)}
    files = manifest.get("files")
    if not isinstance(files, Mapping) or set(files) != expected:
        raise SavedSystemError(f"{source}/{storage.MANIFEST_NAME}: lists other files than the {len(expected)} its "
                               f"models need ({', '.join(sorted(expected))})")
    present = {path.name for path in root.iterdir() if not path.name.startswith((".", "_"))}
    if present != expected:
        extra, missing = sorted(present - expected), sorted(expected - present)
        raise SavedSystemError(f"{source}: " + (f"{missing[0]} is missing" if missing else
                                                f"{extra[0]} is not part of the published system"))
    return dict(files)


def _read_checked(root: Path, file_name: str, files: Mapping[str, str], max_bytes: int, what: str) -> bytes:
    try:
        content = local_files.read_regular_file(root / file_name, max_bytes, what)
    except local_files.UnreadableFileError as error:
        raise SavedSystemError(str(error)) from None
    model_files.check_digest(content, files[file_name], str(root / file_name))
    return content


def _read_embedder(root: Path, name: str, description: Any, files: Mapping[str, str]) -> Any:
    file_name = MODEL_FILE.format(name=name)
    content = _read_checked(root, file_name, files, model_files.MAX_WEIGHTS_BYTES, "weights file")
    if not isinstance(description, Mapping):
        raise SavedSystemError(f"{root / storage.MANIFEST_NAME}: no description of the embedder {name!r}")
    return model_files.build_model(description, content, str(root / file_name))


def _read_cohort(root: Path, name: str, files: Mapping[str, str], dimension: int) -> np.ndarray:
    file_name = COHORT_FILE.format(name=name)
    content = _read_checked(root, file_name, files, MAX_COHORT_BYTES, "cohort file")
    try:
        cohort = np.load(io.BytesIO(content), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise SavedSystemError(f"{root / file_name}: not a readable cohort ({str(error)[:100]})") from None
    if cohort.ndim != 2 or cohort.shape[0] < 1 or cohort.shape[1] != dimension or cohort.dtype.kind != "f" \
            or not np.isfinite(cohort).all():
        raise SavedSystemError(f"{root / file_name}: a cohort is one or more finite vectors of the embedder's size "
                               f"({dimension}); found shape {cohort.shape}")
    return cohort


def read_clip(path: str | Path, resample: bool = False) -> np.ndarray:
    """A WAV file checked as ingestion checks a clip (mono 16-bit PCM, 16 kHz unless ``resample``), fitted to
    1 s (its first second is scored); a ValueError naming the file and the reason otherwise. Only regular files
    of at most :data:`MAX_CLIP_BYTES` are read."""
    from training.speech import ingest as speech_ingest
    from training.speech import speech_commands as layout

    try:
        data = local_files.read_regular_file(path, MAX_CLIP_BYTES, "WAV file")
    except local_files.UnreadableFileError as error:
        raise ValueError(str(error)) from None
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
    # Enrollment clips (0-based) identical to the test clip: such a trial scores a clip against itself, so its
    # decision says nothing about the speaker. Flagged, not refused: a user may check a system that way.
    test_in_enrollment: tuple[int, ...] = ()


def verify(system: VerificationSystem, enrollment: Sequence[np.ndarray], test: np.ndarray,
           p_target: float = 0.01) -> Decision:
    """Enroll a speaker from its clips (int16, 1 s each) and decide whether ``test`` is the same speaker: each
    model's cosine score S-normalised against its cohort, fused to an LLR, accepted at the Bayes threshold of
    ``p_target`` (C_miss = C_fa = 1)."""
    from training.speech.audio.features import compute_features

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
    if not math.isfinite(llr):
        raise ValueError(f"the system gave no finite score ({', '.join(f'{n} {s}' for n, s in scores.items())}): "
                         "the clips' features or the system's models are broken")
    repeated = tuple(index for index, clip in enumerate(clips[:-1]) if np.array_equal(clip, clips[-1]))
    return Decision(scores, llr, threshold, p_target, llr >= threshold, repeated)
