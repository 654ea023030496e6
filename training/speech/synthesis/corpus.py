"""The synthetic corpus: its recipe, checks and place, the split lists, the report and the manifest — published
whole (training.storage) or not at all, and not synthesised again when complete."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from training import REPO_ROOT, storage
from training.speech.constants import SPEECH_GENERATOR_VERSION
from training.speech.speech_commands import ALL_WORDS, BACKGROUND_NOISE, SAMPLE_RATE, which_set
from training.speech.synthesis.engines import (
    SLOW_ENGINES,
    check_variants_are_used,
    make_espeak_root,
    package_versions,
    require_voices,
)
from training.speech.synthesis.jobs import NoiseJob, SpeakerJob
from training.speech.synthesis.noise import BABBLE_TALKERS, BACKGROUND_SECONDS, babble_variants
from training.speech.synthesis.pool import TASK_TIMEOUT_SECONDS, run_jobs
from training.speech.synthesis.speakers import Speaker, make_speaker, speaker_ids, utterance_plan
from training.speech.synthesis.voices import ESPEAK, ESPEAK_NG, Voice
from training.storage import DatasetError

log = logging.getLogger(__name__)

GENERATOR_VERSION = SPEECH_GENERATOR_VERSION  # bumped in training.speech.constants
DATASET_KIND = "speech_commands_synthetic"
LEGACY_REPORT_NAME = "_synthesis.json"  # what marked a complete corpus before they went through storage.publish
VALIDATION_PERCENTAGE = 10.0
VARIANTS_PER_ROOT = 64  # our espeak(-ng) variants per data directory (_espeak_roots: the program's list is bounded)
TESTING_PERCENTAGE = 10.0
WORD_PATTERN = re.compile(r"^[a-z]+$")


def default_corpus_dir(speakers: int, repetitions: int, seed: int) -> Path:
    return (REPO_ROOT / "var" / "corpora"
            / f"speech-commands-synthetic-v{GENERATOR_VERSION}-s{speakers}-r{repetitions}-seed{seed}")


def _recipe(speakers: int, words: Sequence[str], repetitions: int, seed: int) -> dict[str, Any]:
    return {"generator_version": GENERATOR_VERSION, "speakers": speakers, "words": list(words),
            "repetitions": repetitions, "seed": seed}


def _validate(speakers: int, words: Sequence[str], repetitions: int, seed: int, processes: int | None,
              task_timeout_seconds: float) -> None:
    def require_int(name: str, value: Any, minimum: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")

    require_int("speakers", speakers, 1)
    require_int("repetitions", repetitions, 1)
    require_int("seed", seed, 0)
    if processes is not None:
        require_int("processes", processes, 1)
    if isinstance(task_timeout_seconds, bool) or not isinstance(task_timeout_seconds, int | float) \
            or not task_timeout_seconds > 0:
        raise ValueError(f"task_timeout_seconds must be a number of seconds > 0, got {task_timeout_seconds!r}")
    if isinstance(words, str):
        raise ValueError(f"words must be a sequence of words, not the string {words!r} (split it first)")
    if len(words) == 0:
        raise ValueError("words is empty: name at least one word")
    for word in words:
        if not isinstance(word, str) or not WORD_PATTERN.match(word):
            raise ValueError(f"word {word!r}: words must be lowercase ASCII letters only (a-z)")
    repeated = sorted({word for word in words if list(words).count(word) > 1})
    if repeated:
        raise ValueError(f"words listed more than once: {', '.join(repeated)}")


def _holds_other_content(destination: Path) -> bool:
    """Whether publishing at ``destination`` would replace something that is not one of our corpora."""
    if not destination.exists():
        return False
    if not destination.is_dir():
        return True
    return any(destination.iterdir()) and not (destination / LEGACY_REPORT_NAME).is_file()


def synthesize_corpus(
    destination: str | Path,
    speakers: int = 100,
    words: Sequence[str] = ALL_WORDS,
    repetitions: int = 2,
    seed: int = 0,
    processes: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    task_timeout_seconds: float = TASK_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Write a synthetic Speech Commands corpus at ``destination`` (atomically, with ``storage.publish``) and return
    its manifest, which holds the synthesis report.

    A complete corpus of the same recipe already there is returned untouched; a different one is an error unless
    ``overwrite``. ``progress(done, total)`` is called in this process as utterances finish. With more than one
    process, a speaker without a result after ``task_timeout_seconds`` fails the corpus (SynthesisWorkerError).
    """
    _validate(speakers, words, repetitions, seed, processes, task_timeout_seconds)
    speakers, repetitions, seed, words = int(speakers), int(repetitions), int(seed), tuple(words)  # JSON-able
    destination = Path(destination).expanduser().resolve()
    recipe = _recipe(speakers, words, repetitions, seed)
    # storage.publish replaces a directory without a manifest (an interrupted dataset); this one may be the user's.
    if storage.read_manifest(str(destination)) is None and not overwrite and _holds_other_content(destination):
        raise DatasetError(f"{destination}: exists and is not a complete synthetic corpus (no "
                           f"{storage.MANIFEST_NAME}); choose another destination or pass overwrite=True "
                           "(--overwrite) to replace it")

    roster = [make_speaker(seed, number, speaker_id) for number, speaker_id in enumerate(speaker_ids(seed, speakers))]
    voices = {speaker.voice for speaker in roster} | {Voice(ESPEAK_NG, "en-us")}  # espeak-ng also makes the babble
    plan = tuple(utterance_plan(words, repetitions))

    def write(staging_location: storage.Location) -> dict[str, Any]:
        require_voices(voices)
        staging = Path(staging_location.path)  # a local directory: the TTS engines write files
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="cloudburst-espeak-") as espeak_scratch:
            roots = _espeak_roots(Path(espeak_scratch), roster, seed, voices)
            for directory in (*words, BACKGROUND_NOISE):
                (staging / directory).mkdir()
            speaker_jobs = [SpeakerJob(speaker, plan, seed, staging,
                                       {speaker.engine: roots[speaker.variant_name]} if speaker.variant_name in roots
                                       else {}) for speaker in roster]
            babble_root = {ESPEAK_NG: roots[next(iter(babble_variants(seed, BABBLE_TALKERS)))]}
            noise_jobs = [NoiseJob(name, seed, staging, babble_root) for name in BACKGROUND_SECONDS]
            # Slowest first (festival and RHVoice speakers, then the noises), so no long job starts last and idles
            # other cores.
            jobs = [job for job in speaker_jobs if job.speaker.engine in SLOW_ENGINES] + noise_jobs + \
                [job for job in speaker_jobs if job.speaker.engine not in SLOW_ENGINES]
            worker_count = min(processes or os.cpu_count() or 1, len(jobs))
            clips = run_jobs(jobs, worker_count, len(plan) * speakers, progress, task_timeout_seconds)
        _write_lists(staging, clips)
        (staging / "README.txt").write_text(_readme(recipe))
        return _report(roster, clips, time.perf_counter() - started, voices, worker_count)

    manifest, created = storage.publish(str(destination), DATASET_KIND, recipe, write, overwrite=overwrite)
    if not created:
        log.info("%s: already complete, nothing to do", destination)
    return manifest


def _espeak_roots(scratch: Path, roster: list[Speaker], seed: int, voices: set[Voice]) -> dict[str, Path]:
    """Variant name → the ``--path`` of espeak-ng (or espeak) that holds it: our speakers' variants, and espeak-ng's
    babble talkers. espeak(-ng) lists at most 350 voices and variants (its N_VOICES_LIST, about 100 of them its
    own) and reports a variant past that as missing, so each root holds at most VARIANTS_PER_ROOT of ours; where a
    variant file lies does not change a sample."""
    roots: dict[str, Path] = {}
    for program in sorted({voice.engine for voice in voices} & {ESPEAK_NG, ESPEAK}):
        variants = [(speaker.variant_name, speaker.variant) for speaker in roster if speaker.engine == program]
        groups = [variants[start:start + VARIANTS_PER_ROOT] for start in range(0, len(variants), VARIANTS_PER_ROOT)]
        if program == ESPEAK_NG:
            groups.append(list(babble_variants(seed, BABBLE_TALKERS).items()))
        for number, group in enumerate(group for group in groups if group):
            root = make_espeak_root(scratch / f"{program}-{number}", dict(group), program)
            check_variants_are_used(root, "en-us", group[-1][0], program)  # the last: the first past a limit
            roots.update((name, root) for name, _ in group)
    return roots


def _write_lists(staging: Path, clips: list[str]) -> None:
    """validation_list.txt and testing_list.txt by Speech Commands' own rule (training is everything else)."""
    for split, name in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        chosen = [clip for clip in clips if which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE) == split]
        (staging / name).write_text("".join(f"{clip}\n" for clip in chosen))


def _report(roster: list[Speaker], clips: list[str], seconds: float, voices: set[Voice],
            processes: int) -> dict[str, Any]:
    """The manifest's content fields (the recipe, file list and creation time are storage.publish's)."""
    splits = {"training": 0, "validation": 0, "testing": 0}
    for clip in clips:
        splits[which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE)] += 1
    engine_counts: dict[str, int] = {}
    family_counts: dict[str, int] = {}
    for speaker in roster:
        engine_counts[speaker.engine] = engine_counts.get(speaker.engine, 0) + 1
        family_counts[speaker.family] = family_counts.get(speaker.family, 0) + 1
    return {
        "speakers": len(roster),
        "utterances": len(clips),
        "seconds": round(seconds, 2),
        "utterances_per_second": round(len(clips) / seconds, 1),
        "processes": processes,
        "engines": dict(sorted(engine_counts.items())),
        "families": dict(sorted(family_counts.items())),
        "engine_versions": package_versions(voices),
        "splits": splits,
        "sample_rate": SAMPLE_RATE,
        "background_noise": {f"{name}.wav": seconds for name, seconds in BACKGROUND_SECONDS.items()},
        "speaker_voices": [_speaker_entry(speaker) for speaker in roster],
    }


def _speaker_entry(speaker: Speaker) -> dict[str, Any]:
    channel = speaker.channel
    return {"speaker": speaker.speaker_id, "family": speaker.family, "engine": speaker.engine,
            "voice": speaker.voice.name, "language": speaker.voice.language, "warp": speaker.warp,
            "room": None if speaker.room is None else {"rt60_seconds": speaker.room.rt60_seconds,
                                                       "direct_to_reverberant_db":
                                                           speaker.room.direct_to_reverberant_db},
            "channel": {"telephone": channel.telephone, "high_pass_hz": channel.high_pass_hz,
                        "low_pass_hz": channel.low_pass_hz,
                        "colour": [[bell.centre_hz, bell.gain_db, bell.q] for bell in channel.colour]}}


def speaker_families(corpus: dict[str, Any] | str | Path) -> dict[str, str]:
    """Speaker id → voice family (e.g. ``espeak-ng/de``, ``mbrola/us2``) of a synthetic corpus, given its manifest
    (what ``synthesize_corpus`` returns) or its directory."""
    if isinstance(corpus, dict):
        manifest, where = corpus, "the manifest"
    else:
        where = str(corpus)
        manifest = storage.require_manifest(where, DATASET_KIND)
    if "speaker_voices" not in manifest:
        raise DatasetError(f"{where}: no speaker_voices in its manifest: not a synthetic Speech Commands corpus")
    # Version 1 corpora recorded no family; theirs was always engine/voice.
    return {entry["speaker"]: entry.get("family") or f"{entry['engine']}/{entry['voice']}"
            for entry in manifest["speaker_voices"]}


def _readme(recipe: dict[str, Any]) -> str:
    return (
        "Synthetic Speech Commands corpus, generated offline by Cloudburst "
        "(training/speech/synthesis.py).\n"
        f"Recipe: {json.dumps(recipe, sort_keys=True)}\n"
        "Voices are TTS engines (espeak-ng, espeak, MBROLA, Pico, festival, flite, RHVoice) in many voice families, "
        "English and foreign-accented, with per-speaker variants, a vocal-tract warp, a room and a microphone/"
        "channel: distinguishable speakers, but far less varied than real people. The manifest's speaker_voices "
        "name each speaker's family.\n"
        f"Layout as Speech Commands: <word>/<speaker>_nohash_<n>.wav, {BACKGROUND_NOISE}/, validation_list.txt, "
        f"testing_list.txt; {storage.MANIFEST_NAME} (with the synthesis report) is written last.\n"
    )
