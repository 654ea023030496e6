"""The work units a synthesis worker runs: one speaker's clips or one background-noise recording, written into the
staging directory."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from training.speech.speech_commands import BACKGROUND_NOISE
from training.speech.synthesis.acoustics import encode_wav, shape_clip
from training.speech.synthesis.engines import RHVoice, espeak, festival, flite, mbrola, pico
from training.speech.synthesis.noise import background_noise
from training.speech.synthesis.speakers import (
    ENDING_WEIGHTS,
    ENDINGS,
    UTTERANCE_ACOUSTICS_STREAM,
    Speaker,
    utterance_rng,
)
from training.speech.synthesis.voices import ESPEAK, ESPEAK_NG, FLITE, MBROLA, PICO, RHVOICE, text_for


@dataclass(frozen=True)


class SpeakerJob:
    speaker: Speaker
    plan: tuple[tuple[str, int], ...]
    seed: int
    staging: Path
    espeak_roots: dict[str, Path]  # program (espeak-ng, espeak) → its --path with our variants


@dataclass(frozen=True)


class NoiseJob:
    name: str
    seed: int
    staging: Path
    espeak_roots: dict[str, Path]


def _engine_audio(job: SpeakerJob, rngs: list[np.random.Generator], scratch: Path) -> list[tuple[int, np.ndarray]]:
    """Raw TTS output for every utterance of the job, drawing each utterance's engine jitter from its own rng."""
    speaker, voice = job.speaker, job.speaker.voice
    texts = [text_for(voice, word) + str(rng.choice(ENDINGS, p=ENDING_WEIGHTS))
             for (word, _), rng in zip(job.plan, rngs, strict=True)]
    tempo_jitter = [float(rng.uniform(0.92, 1.08)) for rng in rngs]
    if voice.engine in (ESPEAK_NG, ESPEAK, MBROLA):
        pitch_jitter = [int(rng.integers(-8, 9)) for rng in rngs]
        if voice.engine == MBROLA:
            return [mbrola(voice, text, round(speaker.tempo * tempo), int(speaker.pitch) + pitch)
                    for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
        return [espeak(job.espeak_roots[voice.engine], voice.name, speaker.variant_name, text,
                       round(speaker.tempo * tempo), int(speaker.pitch) + pitch, voice.engine)
                for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
    if voice.engine in (PICO, RHVOICE):
        pitch_jitter = [float(rng.uniform(0.95, 1.05)) for rng in rngs]
        settings = [(text, speaker.tempo * tempo, speaker.pitch * pitch)
                    for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
        if voice.engine == PICO:
            return [pico(voice, text, tempo, pitch, scratch) for text, tempo, pitch in settings]
        with RHVoice() as engine:
            return [engine.say(voice, text, tempo, pitch) for text, tempo, pitch in settings]
    if voice.engine == FLITE:
        return [flite(voice.name, text, speaker.tempo * tempo, speaker.pitch, scratch)
                for text, tempo in zip(texts, tempo_jitter, strict=True)]
    requests = [(text, speaker.tempo * tempo) for text, tempo in zip(texts, tempo_jitter, strict=True)]
    return festival(voice, requests, speaker.pitch, scratch)


def _synthesize_speaker(job: SpeakerJob) -> tuple[int, list[str]]:
    """Write one speaker's clips into the staging directory; returns (speaker number, relative paths)."""
    speaker = job.speaker
    rngs = [utterance_rng(job.seed, speaker.number, word, repetition) for word, repetition in job.plan]
    with tempfile.TemporaryDirectory(prefix="cloudburst-tts-") as scratch:
        audio = _engine_audio(job, rngs, Path(scratch))
    written = []
    for (word, repetition), rng, (rate, samples) in zip(job.plan, rngs, audio, strict=True):
        relative = f"{word}/{speaker.speaker_id}_nohash_{repetition}.wav"
        surroundings = utterance_rng(job.seed, speaker.number, word, repetition, UTTERANCE_ACOUSTICS_STREAM)
        try:
            clip = shape_clip(samples, rate, speaker, rng, surroundings)
        except RuntimeError as error:
            raise RuntimeError(f"{relative} ({speaker.family}): {error}") from error
        (job.staging / relative).write_bytes(encode_wav(clip))
        written.append(relative)
    return speaker.number, written


def _write_noise(job: NoiseJob) -> tuple[int, list[str]]:
    relative = f"{BACKGROUND_NOISE}/{job.name}.wav"
    (job.staging / relative).write_bytes(encode_wav(background_noise(job.name, job.seed,
                                                                     job.espeak_roots[ESPEAK_NG])))
    return -1, [relative]


def run_job(job: SpeakerJob | NoiseJob) -> tuple[int, list[str]]:
    return _synthesize_speaker(job) if isinstance(job, SpeakerJob) else _write_noise(job)


def describe_job(job: SpeakerJob | NoiseJob) -> str:
    if isinstance(job, SpeakerJob):
        speaker = job.speaker
        return f"speaker {speaker.speaker_id} (number {speaker.number}, {speaker.family})"
    return f"background noise {job.name}"
