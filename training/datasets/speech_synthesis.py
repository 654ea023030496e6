"""A synthetic Speech Commands corpus, made offline with the Debian TTS engines (espeak-ng, flite, festival).

No real speech corpus is reachable here, so this writes one in Speech Commands' exact layout (see
``speech_commands``): ``<word>/<speaker>_nohash_<n>.wav`` (1 s, 16 kHz, mono, 16-bit), ``_background_noise_/``,
``validation_list.txt`` and ``testing_list.txt`` by the dataset's own ``which_set`` rule, published atomically by
``storage.publish``: its ``_manifest.json``, written last, holds the synthesis report and marks a complete corpus.

Speaker variety is the hard part: ``-p``/``-s`` alone barely change a TTS voice. So each synthetic speaker gets
 - an engine and voice: mostly espeak-ng with its own *variant file* (formant frequencies, strengths and widths,
   pitch base and range, breath, roughness, flutter, tone, sometimes a Klatt glottal source) and one of espeak-ng's
   English accents; some flite voices (kal16, awb, rms, slt) with their own mean F0 and tempo; a few festival voices;
 - a vocal-tract warp: the engine's output is resampled by a factor 0.9–1.1 and then read as 16 kHz again, which
   moves formants and pitch together like a longer or shorter vocal tract.
Each utterance then gets a little tempo/pitch jitter and intonation (the trailing punctuation), is trimmed,
scaled to a random peak level, placed at a random offset in the 1 s window, and gets a faint room-noise floor.

espeak-ng only reads variants from ``<data>/voices/!v/`` (an unknown one is silently ignored), so the variant files go
into a private mirror of the system's espeak-ng-data (symbolic links plus our ``voices/!v``) passed with ``--path``.

Every random draw comes from a generator keyed on (seed, speaker number, word, repetition), so the same arguments
give byte-identical files whatever the process count or scheduling (for the same engine versions, which the report
records), and a corpus of fewer words holds the very same clips for the words it has. The work runs in spawned
worker processes (a fresh interpreter each, so nothing the caller changed, such as the signal handlers a Horovod run
leaves behind, reaches them); a worker that dies or takes longer than ``TASK_TIMEOUT_SECONDS`` on one speaker fails
the corpus with an error naming that speaker.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import multiprocessing
import os
import pickle
import re
import shutil
import struct
import subprocess
import tempfile
import time
import traceback
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing.connection import Connection, wait
from pathlib import Path
from signal import Signals
from typing import Any, NamedTuple

import numpy as np
from scipy import signal

from training import REPO_ROOT, storage
from training.datasets.speech_commands import ALL_WORDS, BACKGROUND_NOISE, KEYWORDS, SAMPLE_RATE, which_set
from training.storage import DatasetError

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1  # bump whenever the same recipe would produce different bytes
DATASET_KIND = "speech_commands_synthetic"
LEGACY_REPORT_NAME = "_synthesis.json"  # what marked a complete corpus before they went through storage.publish
# One speaker's (or background noise's) work; the slowest, a festival speaker of all 35 words, takes about 2 s.
TASK_TIMEOUT_SECONDS = 300.0
VALIDATION_PERCENTAGE = 10.0
TESTING_PERCENTAGE = 10.0
CLIP_SAMPLES = SAMPLE_RATE  # 1 s
MAX_WORD_SAMPLES = int(0.95 * SAMPLE_RATE)  # longer words are sped up to fit, leaving room for an offset

ESPEAK, FLITE, FESTIVAL = "espeak-ng", "flite", "festival"
ENGINE_PACKAGES = {ESPEAK: "espeak-ng", FLITE: "flite",
                   FESTIVAL: "festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts"}
# Speaker number modulo 20 → engine: 80 % espeak-ng, 15 % flite, 5 % festival (the slowest). Slots 1 and 2 come
# early so that even a 3-speaker corpus uses all three engines.
FLITE_SLOTS = (1, 8, 14)
FESTIVAL_SLOTS = (2,)
ESPEAK_ACCENTS = ("en-us", "en-us", "en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc")  # en-us twice: most Speech Commands speakers are American
FLITE_VOICES = {"kal16": "male", "awb": "male", "rms": "male", "slt": "female"}  # flite ignores F0 for rms
FESTIVAL_VOICES = {"kal_diphone": "male", "ked_diphone": "male", "cmu_us_slt_arctic_hts": "female"}
# What a speaker adds after the word: it changes espeak-ng's intonation (flite and festival mostly ignore it).
ENDINGS, ENDING_WEIGHTS = (".", "!", ",", "?"), (0.5, 0.25, 0.15, 0.1)
# Babble is made of words outside the Speech Commands vocabulary, so it never says a keyword.
BABBLE_WORDS = ("the", "and", "we", "could", "maybe", "tomorrow", "kitchen", "really", "people", "later", "coffee",
                "because", "window", "little", "after", "never", "about", "water", "morning", "think", "paper",
                "table", "always", "garden", "music", "friday", "station", "hello", "thanks", "please", "money",
                "over", "there", "where", "number", "today", "evening", "dinner", "market", "letter")
BABBLE_TALKERS = 6
# name → seconds; Speech Commands' own noises are about a minute each.
BACKGROUND_SECONDS = {"white_noise": 60, "pink_noise": 60, "brown_noise": 45, "running_tap": 60, "mains_hum": 30,
                      "babble": 40}
# Streams of the per-purpose random generators (the first key), so no two purposes ever share draws.
SPEAKER_STREAM, UTTERANCE_STREAM, NOISE_STREAM = 1, 2, 3
WORD_PATTERN = re.compile(r"^[a-z]+$")


class EngineNotFoundError(FileNotFoundError):
    """A TTS engine binary is missing; the message says which Debian package(s) install it."""


class SynthesisWorkerError(RuntimeError):
    """A synthesis worker died, or did not finish its job in time; the message names the speaker (or noise)."""


@dataclass(frozen=True)
class Speaker:
    """One synthetic speaker: engine, voice and the per-speaker settings the utterances start from."""

    number: int
    speaker_id: str  # 8 lowercase hex characters, like Speech Commands' ids
    engine: str
    voice: str  # espeak-ng accent, flite voice or festival voice
    warp: float  # vocal-tract warp: > 1 lowers formants and pitch
    tempo: float  # espeak-ng: words per minute; flite/festival: duration stretch
    pitch: float  # espeak-ng: -p (0–99); flite/festival: target mean F0 in Hz
    variant: str = ""  # espeak-ng: the variant file's text

    @property
    def variant_name(self) -> str:
        return f"cb-{self.speaker_id}"


# --- Speakers ------------------------------------------------------------------------------------------------


def speaker_ids(seed: int, count: int) -> list[str]:
    """Distinct 8-hex-character ids for speakers 0..count-1 (a hash of seed and number; re-hashed on a clash)."""
    ids: list[str] = []
    taken: set[str] = set()
    for number in range(count):
        attempt = 0
        while True:
            key = f"cloudburst-synthetic-speaker:{seed}:{number}" + (f":{attempt}" if attempt else "")
            candidate = hashlib.sha1(key.encode()).hexdigest()[:8]
            if candidate not in taken:
                break
            attempt += 1
        taken.add(candidate)
        ids.append(candidate)
    return ids


def make_speaker(seed: int, number: int, speaker_id: str) -> Speaker:
    """The voice of speaker ``number``: its engine by a fixed rotation, everything else drawn from the seed."""
    rng = np.random.default_rng([SPEAKER_STREAM, seed, number])
    warp = round(float(rng.uniform(0.9, 1.1)), 4)
    slot = number % 20
    if slot in FLITE_SLOTS:
        voice = str(rng.choice(list(FLITE_VOICES)))
        return Speaker(number, speaker_id, FLITE, voice, warp, tempo=round(float(rng.uniform(0.85, 1.2)), 3),
                       pitch=round(_f0_mean(rng, FLITE_VOICES[voice]), 1))
    if slot in FESTIVAL_SLOTS:
        voice = str(rng.choice(list(FESTIVAL_VOICES)))
        return Speaker(number, speaker_id, FESTIVAL, voice, warp, tempo=round(float(rng.uniform(0.85, 1.2)), 3),
                       pitch=round(_f0_mean(rng, FESTIVAL_VOICES[voice]), 1))
    accent = str(rng.choice(ESPEAK_ACCENTS))
    variant = espeak_variant(rng, f"cb-{speaker_id}")
    return Speaker(number, speaker_id, ESPEAK, accent, warp, tempo=round(float(rng.uniform(140, 195)), 1),
                   pitch=50.0, variant=variant)


def _f0_mean(rng: np.random.Generator, gender: str) -> float:
    return float(rng.uniform(150, 230) if gender == "female" else rng.uniform(85, 140))


def espeak_variant(rng: np.random.Generator, name: str) -> str:
    """The text of an espeak-ng variant file: a random but plausible male or female voice quality."""
    female = rng.random() < 0.5
    if female:
        base_pitch = rng.uniform(145, 235)
        pitch_range = base_pitch + rng.uniform(40, 110)
        formant_scale = rng.uniform(1.05, 1.2)
    else:
        base_pitch = rng.uniform(70, 130)
        pitch_range = base_pitch + rng.uniform(25, 70)
        formant_scale = rng.uniform(0.9, 1.03)
    lines = ["language variant", f"name {name}", f"gender {'female' if female else 'male'}",
             f"pitch {base_pitch:.0f} {pitch_range:.0f}"]
    for formant in range(9):
        # Each formant moves a little on its own, F1/F2 the most (they carry the vowel colour).
        spread = 0.06 if formant in (1, 2) else 0.03
        frequency = 100 * formant_scale * rng.uniform(1 - spread, 1 + spread)
        strength = rng.uniform(70, 125)
        width = rng.uniform(90, 160) if female else rng.uniform(80, 130)
        freq_add = rng.uniform(-60, 60) if formant in (1, 2) else 0.0
        lines.append(f"formant {formant} {frequency:.0f} {strength:.0f} {width:.0f} {freq_add:.0f}")
    lines.append(f"flutter {rng.uniform(0, 20):.0f}")
    lines.append(f"roughness {rng.integers(0, 6)}")
    lines.append(f"consonants {rng.uniform(80, 125):.0f}")
    lines.append(f"voicing {rng.uniform(85, 130):.0f}")
    lines.append(f"tone 600 {rng.uniform(140, 200):.0f} 1200 {rng.uniform(110, 160):.0f} "
                 f"2000 {rng.uniform(80, 140):.0f}")
    if rng.random() < 0.4:  # breathiness, mostly on vowels
        level = rng.uniform(1, 4)
        lines.append("breath 0 " + " ".join(f"{level * weight:.0f}" for weight in (0.7, 1, 1, 1, 1, 1, 0.7)))
    if rng.random() < 0.3:  # a small room
        lines.append(f"echo {rng.uniform(60, 140):.0f} {rng.uniform(4, 14):.0f}")
    if rng.random() < 0.3:  # another glottal source model: a clearly different timbre
        lines.append(f"klatt {rng.integers(1, 6)}")
    return "\n".join(lines) + "\n"


def word_key(word: str) -> int:
    """A stable number for a word (not its position in the list), so subsets of words share clips."""
    return int(hashlib.sha1(word.encode()).hexdigest()[:8], 16)


def utterance_rng(seed: int, speaker_number: int, word: str, repetition: int) -> np.random.Generator:
    return np.random.default_rng([UTTERANCE_STREAM, seed, speaker_number, word_key(word), repetition])


def utterance_plan(words: Sequence[str], repetitions: int) -> list[tuple[str, int]]:
    """(word, repetition) for one speaker: keywords ``repetitions`` times, other words once."""
    return [(word, repetition) for word in words for repetition in range(repetitions if word in KEYWORDS else 1)]


# --- Engines -------------------------------------------------------------------------------------------------


def _binary(engine: str) -> str:
    path = shutil.which(engine)
    if path is None:
        raise EngineNotFoundError(
            f"{engine}: not found on PATH; `make setup` installs it (infra/setup.sh installs the Debian package(s) "
            f"{ENGINE_PACKAGES[engine]})")
    return path


def _run(command: list[str], what: str) -> bytes:
    result = subprocess.run(command, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(command)} exited with {result.returncode}: "
                           f"{result.stderr.decode(errors='replace').strip()[-500:]}")
    return result.stdout


def espeak_data_dir() -> Path:
    """The system's espeak-ng-data directory, as ``espeak-ng --version`` reports it."""
    output = _run([_binary(ESPEAK), "--version"], "espeak-ng --version").decode()
    match = re.search(r"Data at:\s*(\S+)", output)
    if not match or not (Path(match.group(1)) / "phontab").exists():
        raise RuntimeError(f"espeak-ng --version does not name a usable data directory: {output.strip()!r}")
    return Path(match.group(1))


def make_espeak_root(root: Path, variants: dict[str, str]) -> Path:
    """A directory to pass as ``espeak-ng --path``: links to the system data plus our variants in voices/!v."""
    system = espeak_data_dir()
    data = root / "espeak-ng-data"
    (data / "voices" / "!v").mkdir(parents=True)
    for entry in system.iterdir():
        if entry.name != "voices":
            (data / entry.name).symlink_to(entry)
    for entry in (system / "voices").iterdir():
        if entry.name != "!v":
            (data / "voices" / entry.name).symlink_to(entry)
    for name, text in variants.items():
        (data / "voices" / "!v" / name).write_text(text)
    return root


def espeak(espeak_root: Path, accent: str, variant_name: str, text: str, words_per_minute: int,
           pitch: int) -> tuple[int, np.ndarray]:
    """(sample rate, samples in [-1, 1]) of espeak-ng speaking ``text``."""
    command = [_binary(ESPEAK), f"--path={espeak_root}", "-v", f"{accent}+{variant_name}",
               "-s", str(words_per_minute), "-p", str(pitch), "--stdout", text]
    return decode_wav(_run(command, f"espeak-ng ({accent}+{variant_name}, {text!r})"))


def check_variants_are_used(espeak_root: Path, accent: str, variant_name: str) -> None:
    """espeak-ng falls back to its default voice, silently, when it cannot find a variant: fail loudly instead."""
    ours = espeak(espeak_root, accent, variant_name, "yes.", 175, 50)[1]
    plain = decode_wav(_run([_binary(ESPEAK), "-v", accent, "--stdout", "yes."], "espeak-ng"))[1]
    if ours.shape == plain.shape and np.array_equal(ours, plain):
        raise RuntimeError(f"espeak-ng ignored the variant file {variant_name} under {espeak_root}/espeak-ng-data/"
                           "voices/!v (a changed data layout in this espeak-ng version?)")


def flite(voice: str, text: str, duration_stretch: float, f0_mean: float, scratch: Path) -> tuple[int, np.ndarray]:
    out = scratch / "flite.wav"
    _run([_binary(FLITE), "-voice", voice, "--setf", f"duration_stretch={duration_stretch:.4f}",
          "--setf", f"int_f0_target_mean={f0_mean:.1f}", "-t", text, "-o", str(out)], f"flite ({voice}, {text!r})")
    return decode_wav(out.read_bytes())


def festival(voice: str, requests: list[tuple[str, float]], f0_mean: float,
             scratch: Path) -> list[tuple[int, np.ndarray]]:
    """Synthesize (text, duration stretch) requests in one festival process (its start-up dominates)."""
    f0_std = 0.14 * f0_mean
    script = [f"(voice_{voice})",
              f"(set! int_lr_params '((target_f0_mean {f0_mean:.1f}) (target_f0_std {f0_std:.1f}) "
              "(model_f0_mean 170) (model_f0_std 34)))"]  # the diphone voices' own model values; HTS ignores it
    for index, (text, stretch) in enumerate(requests):
        script.append(f"(Parameter.set 'Duration_Stretch {stretch:.4f})")
        script.append(f"(utt.save.wave (utt.synth (Utterance Text \"{text}\")) \"{scratch / f'{index}.wav'}\" 'riff)")
    script_path = scratch / "synthesize.scm"
    script_path.write_text("\n".join(script) + "\n")
    _run([_binary(FESTIVAL), "--batch", str(script_path)], f"festival ({voice})")
    results = []
    for index in range(len(requests)):
        path = scratch / f"{index}.wav"
        if not path.exists():
            raise RuntimeError(f"festival ({voice}) wrote no audio for {requests[index][0]!r}; is its voice "
                               f"installed? (`make setup` installs {ENGINE_PACKAGES[FESTIVAL]})")
        results.append(decode_wav(path.read_bytes()))
    return results


def engine_versions(engines: set[str]) -> dict[str, str]:
    """Each engine's version: byte-identical corpora across machines need the same engine versions."""
    versions = {}
    for engine in sorted(engines):
        text = subprocess.run([_binary(engine), "--version"], capture_output=True, text=True, check=False).stdout
        match = re.search(r"\d+\.\d+(?:\.\d+)?", text)
        versions[engine] = match.group(0) if match else "unknown"
    return versions


# --- Audio ---------------------------------------------------------------------------------------------------


def decode_wav(data: bytes) -> tuple[int, np.ndarray]:
    """(rate, mono float samples) of 16-bit PCM WAV bytes; tolerates espeak-ng's streaming header (size 0x7ffff000)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RuntimeError(f"TTS output is not a WAV file (starts with {data[:12]!r})")
    position, rate, channels = 12, None, 1
    while position + 8 <= len(data):
        chunk_id, size = struct.unpack_from("<4sI", data, position)
        body = position + 8
        if chunk_id == b"fmt ":
            audio_format, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if audio_format != 1 or bits != 16:
                raise RuntimeError(f"TTS output is not 16-bit PCM (format {audio_format}, {bits} bits)")
        elif chunk_id == b"data":
            if rate is None:
                raise RuntimeError("TTS output has its data chunk before the fmt chunk")
            end = min(len(data), body + size)
            end -= (end - body) % (2 * channels)
            samples = np.frombuffer(data[body:end], dtype="<i2").reshape(-1, channels)[:, 0]
            return rate, samples.astype(np.float64) / 32768.0
        position = body + size + (size % 2)
    raise RuntimeError("TTS output has no data chunk")


def encode_wav(samples: np.ndarray) -> bytes:
    """16 kHz mono 16-bit PCM WAV bytes (the plain 44-byte header Speech Commands uses)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(samples.astype("<i2").tobytes())
    return buffer.getvalue()


def to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.round(samples * 32767.0), -32768, 32767).astype(np.int16)


def trim_silence(samples: np.ndarray, rate: int, floor_db: float = -40.0) -> np.ndarray:
    """The samples from the first to the last 10 ms frame within ``floor_db`` of the loudest frame (+1 frame)."""
    frame = max(1, rate // 100)
    frames = len(samples) // frame
    if frames == 0:
        return samples
    energy = np.sqrt(np.mean(samples[: frames * frame].reshape(frames, frame) ** 2, axis=1))
    loud = np.flatnonzero(energy > energy.max() * 10 ** (floor_db / 20))
    if energy.max() == 0 or loud.size == 0:
        return samples[:0]
    start, stop = max(0, loud[0] - 1) * frame, min(frames, loud[-1] + 2) * frame
    return samples[start:stop]


def resample(samples: np.ndarray, ratio: float) -> np.ndarray:
    """Polyphase resampling by ``ratio`` (output length / input length), approximated by a small fraction."""
    fraction = Fraction(ratio).limit_denominator(512)
    return signal.resample_poly(samples, fraction.numerator, fraction.denominator)


def shape_clip(samples: np.ndarray, rate: int, warp: float, rng: np.random.Generator) -> np.ndarray:
    """TTS output → a 1 s, 16 kHz int16 clip: trim, warp (+ jitter) to 16 kHz, random level, offset, room noise."""
    speech = trim_silence(samples, rate)
    if speech.size < rate // 50:
        raise RuntimeError("the engine produced (almost) no sound")
    ratio = SAMPLE_RATE / rate * warp * rng.uniform(0.98, 1.02)
    # Too long for the window: speed it up (raising the pitch a little) rather than cut the word.
    ratio = min(ratio, (MAX_WORD_SAMPLES - 2) / speech.size)
    word = resample(speech, ratio)[:MAX_WORD_SAMPLES]
    ramp = min(80, word.size // 4)  # 5 ms fades: trimming may cut mid-waveform
    word[:ramp] *= np.linspace(0, 1, ramp)
    word[word.size - ramp :] *= np.linspace(1, 0, ramp)
    peak_db = rng.uniform(-20, -1)
    word *= 10 ** (peak_db / 20) / max(np.abs(word).max(), 1e-9)
    clip = np.zeros(CLIP_SAMPLES)
    offset = int(rng.integers(0, CLIP_SAMPLES - word.size + 1))
    clip[offset : offset + word.size] = word
    clip += room_noise(rng, CLIP_SAMPLES, level_db=rng.uniform(-72, -55))  # no clip is pure digital silence
    return to_int16(clip)


def room_noise(rng: np.random.Generator, samples: int, level_db: float) -> np.ndarray:
    """Gaussian noise, low-passed by a random one-pole filter (white … brownish), at ``level_db`` RMS."""
    pole = rng.uniform(0.0, 0.97)
    noise = signal.lfilter([1 - pole], [1, -pole], rng.standard_normal(samples))
    return noise * (10 ** (level_db / 20) / max(np.sqrt(np.mean(noise**2)), 1e-12))


# --- Background noise ----------------------------------------------------------------------------------------


def _normalise(samples: np.ndarray, rms_db: float, peak: float = 0.95) -> np.ndarray:
    samples = samples - samples.mean()
    samples = samples * (10 ** (rms_db / 20) / max(np.sqrt(np.mean(samples**2)), 1e-12))
    return np.clip(samples, -peak, peak)


def _spectral_noise(rng: np.random.Generator, samples: int, exponent: float) -> np.ndarray:
    """Gaussian noise whose power falls as 1/f**exponent (0 white, 1 pink, 2 brown), above 20 Hz."""
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    frequencies = np.fft.rfftfreq(samples, 1 / SAMPLE_RATE)
    spectrum *= np.where(frequencies > 20, np.maximum(frequencies, 20) ** (-exponent / 2), 0.0)
    return np.fft.irfft(spectrum, samples)


def _slow_envelope(rng: np.random.Generator, samples: int, hertz: float) -> np.ndarray:
    """A smooth random curve around 0 (std ~1) that changes on the scale of 1/hertz seconds."""
    knots = rng.standard_normal(int(samples / SAMPLE_RATE * hertz) + 2)
    curve = np.interp(np.arange(samples), np.linspace(0, samples, knots.size), knots)
    return curve


def running_tap(rng: np.random.Generator, samples: int) -> np.ndarray:
    """Band-limited noise (water hiss) with slow swells and short gurgles."""
    band = signal.butter(4, [rng.uniform(300, 700), rng.uniform(3000, 5000)], btype="bandpass", fs=SAMPLE_RATE,
                         output="sos")
    hiss = signal.sosfilt(band, rng.standard_normal(samples))
    swell = 1 + 0.25 * _slow_envelope(rng, samples, 0.5)
    gurgle = 1 + 0.3 * np.clip(_slow_envelope(rng, samples, 12.0), 0, None)
    return hiss * swell * gurgle


def mains_hum(rng: np.random.Generator, samples: int) -> np.ndarray:
    """50 or 60 Hz and its harmonics, random phases and falling levels, a slow wobble and a little hiss."""
    fundamental = float(rng.choice([50.0, 60.0]))
    t = np.arange(samples) / SAMPLE_RATE
    hum = sum(rng.uniform(0.3, 1.0) / harmonic * np.sin(2 * np.pi * fundamental * harmonic * t + rng.uniform(0, 6.3))
              for harmonic in range(1, 9))
    return hum * (1 + 0.1 * _slow_envelope(rng, samples, 0.3)) + 0.02 * rng.standard_normal(samples)


def babble(rng: np.random.Generator, samples: int, espeak_root: Path, voices: int) -> np.ndarray:
    """Several synthetic talkers (espeak-ng babble variants) saying non-keyword words at once, overlapping."""
    mix = np.zeros(samples)
    for talker in range(voices):
        text = " ".join(rng.choice(BABBLE_WORDS, size=60)) + "."
        accent = str(rng.choice(ESPEAK_ACCENTS))
        rate, speech = espeak(espeak_root, accent, f"cb-babble-{talker}", text, int(rng.uniform(150, 200)), 50)
        speech = resample(speech, SAMPLE_RATE / rate * rng.uniform(0.9, 1.1))
        stream = np.tile(speech, samples // max(speech.size, 1) + 2)
        start = int(rng.integers(0, speech.size))
        mix += rng.uniform(0.5, 1.0) * stream[start : start + samples]
    return mix


def babble_variants(seed: int, voices: int) -> dict[str, str]:
    rng = np.random.default_rng([NOISE_STREAM, seed, 1000])
    return {f"cb-babble-{talker}": espeak_variant(rng, f"cb-babble-{talker}") for talker in range(voices)}



def background_noise(name: str, seed: int, espeak_root: Path) -> np.ndarray:
    """One of BACKGROUND_SECONDS' noises as int16 samples."""
    rng = np.random.default_rng([NOISE_STREAM, seed, list(BACKGROUND_SECONDS).index(name)])
    samples = BACKGROUND_SECONDS[name] * SAMPLE_RATE
    makers: dict[str, Callable[[], np.ndarray]] = {
        "white_noise": lambda: rng.standard_normal(samples),
        "pink_noise": lambda: _spectral_noise(rng, samples, 1.0),
        "brown_noise": lambda: _spectral_noise(rng, samples, 2.0),
        "running_tap": lambda: running_tap(rng, samples),
        "mains_hum": lambda: mains_hum(rng, samples),
        "babble": lambda: babble(rng, samples, espeak_root, BABBLE_TALKERS),
    }
    return to_int16(_normalise(makers[name](), rms_db=rng.uniform(-22, -14)))


# --- Work units (run in pool workers) ------------------------------------------------------------------------


@dataclass(frozen=True)
class _SpeakerJob:
    speaker: Speaker
    plan: tuple[tuple[str, int], ...]
    seed: int
    staging: Path
    espeak_root: Path


@dataclass(frozen=True)
class _NoiseJob:
    name: str
    seed: int
    staging: Path
    espeak_root: Path


def _engine_audio(job: _SpeakerJob, rngs: list[np.random.Generator], scratch: Path) -> list[tuple[int, np.ndarray]]:
    """Raw TTS output for every utterance of the job, drawing each utterance's engine jitter from its own rng."""
    speaker = job.speaker
    texts = [word + str(rng.choice(ENDINGS, p=ENDING_WEIGHTS)) for (word, _), rng in zip(job.plan, rngs, strict=True)]
    tempo_jitter = [float(rng.uniform(0.92, 1.08)) for rng in rngs]
    if speaker.engine == ESPEAK:
        pitch_jitter = [int(rng.integers(-8, 9)) for rng in rngs]
        return [espeak(job.espeak_root, speaker.voice, speaker.variant_name, text, round(speaker.tempo * tempo),
                       int(speaker.pitch) + pitch)
                for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
    if speaker.engine == FLITE:
        return [flite(speaker.voice, text, speaker.tempo * tempo, speaker.pitch, scratch)
                for text, tempo in zip(texts, tempo_jitter, strict=True)]
    requests = [(text, speaker.tempo * tempo) for text, tempo in zip(texts, tempo_jitter, strict=True)]
    return festival(speaker.voice, requests, speaker.pitch, scratch)


def _synthesize_speaker(job: _SpeakerJob) -> tuple[int, list[str]]:
    """Write one speaker's clips into the staging directory; returns (speaker number, relative paths)."""
    speaker = job.speaker
    rngs = [utterance_rng(job.seed, speaker.number, word, repetition) for word, repetition in job.plan]
    with tempfile.TemporaryDirectory(prefix="cloudburst-tts-") as scratch:
        audio = _engine_audio(job, rngs, Path(scratch))
    written = []
    for (word, repetition), rng, (rate, samples) in zip(job.plan, rngs, audio, strict=True):
        relative = f"{word}/{speaker.speaker_id}_nohash_{repetition}.wav"
        try:
            clip = shape_clip(samples, rate, speaker.warp, rng)
        except RuntimeError as error:
            raise RuntimeError(f"{relative} ({speaker.engine} {speaker.voice}): {error}") from error
        (job.staging / relative).write_bytes(encode_wav(clip))
        written.append(relative)
    return speaker.number, written


def _write_noise(job: _NoiseJob) -> tuple[int, list[str]]:
    relative = f"{BACKGROUND_NOISE}/{job.name}.wav"
    (job.staging / relative).write_bytes(encode_wav(background_noise(job.name, job.seed, job.espeak_root)))
    return -1, [relative]


def _do(job: _SpeakerJob | _NoiseJob) -> tuple[int, list[str]]:
    return _synthesize_speaker(job) if isinstance(job, _SpeakerJob) else _write_noise(job)


def _describe(job: _SpeakerJob | _NoiseJob) -> str:
    if isinstance(job, _SpeakerJob):
        speaker = job.speaker
        return f"speaker {speaker.speaker_id} (number {speaker.number}, {speaker.engine} {speaker.voice})"
    return f"background noise {job.name}"


def _serve_jobs(connection: Connection) -> None:
    """A worker's life: run each job that arrives on ``connection``, send back its result or its exception."""
    while True:
        try:
            job = connection.recv()
        except (EOFError, KeyboardInterrupt):
            return  # the parent closed its end (all done) or is going away; Ctrl-C is the parent's to handle
        try:
            reply = ("done", _do(job))
        except BaseException as error:
            sent = error
            try:
                pickle.loads(pickle.dumps(error))
            except Exception:  # an exception type that does not survive pickling: send its text instead
                sent = RuntimeError(f"{type(error).__name__}: {error}")
            sent.add_note(f"(raised in the synthesis worker for {_describe(job)}; worker traceback:\n"
                          f"{traceback.format_exc().rstrip()})")
            reply = ("failed", sent)
        connection.send(reply)


# --- The corpus ----------------------------------------------------------------------------------------------


def default_corpus_dir(speakers: int, repetitions: int, seed: int) -> Path:
    return REPO_ROOT / "var" / "corpora" / f"speech-commands-synthetic-s{speakers}-r{repetitions}-seed{seed}"


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
    engines = {speaker.engine for speaker in roster} | {ESPEAK}  # espeak-ng also makes the babble
    plan = tuple(utterance_plan(words, repetitions))

    def write(staging_location: storage.Location) -> dict[str, Any]:
        for engine in sorted(engines):
            _binary(engine)
        staging = Path(staging_location.path)  # a local directory: the TTS engines write files
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="cloudburst-espeak-") as espeak_scratch:
            variants = {speaker.variant_name: speaker.variant for speaker in roster if speaker.engine == ESPEAK}
            variants |= babble_variants(seed, BABBLE_TALKERS)
            espeak_root = make_espeak_root(Path(espeak_scratch), variants)
            check_variants_are_used(espeak_root, "en-us", next(iter(variants)))
            for directory in (*words, BACKGROUND_NOISE):
                (staging / directory).mkdir()
            speaker_jobs = [_SpeakerJob(speaker, plan, seed, staging, espeak_root) for speaker in roster]
            noise_jobs = [_NoiseJob(name, seed, staging, espeak_root) for name in BACKGROUND_SECONDS]
            # Slowest first (festival speakers, then the noises), so no long job starts last and idles other cores.
            jobs = [job for job in speaker_jobs if job.speaker.engine == FESTIVAL] + noise_jobs + \
                [job for job in speaker_jobs if job.speaker.engine != FESTIVAL]
            worker_count = min(processes or os.cpu_count() or 1, len(jobs))
            clips = _run_jobs(jobs, worker_count, len(plan) * speakers, progress, task_timeout_seconds)
        _write_lists(staging, clips)
        (staging / "README.txt").write_text(_readme(recipe))
        return _report(roster, clips, time.perf_counter() - started, engines, worker_count)

    manifest, created = storage.publish(str(destination), DATASET_KIND, recipe, write, overwrite=overwrite)
    if not created:
        log.info("%s: already complete, nothing to do", destination)
    return manifest


def _run_jobs(jobs: list[_SpeakerJob | _NoiseJob], processes: int, total: int,
              progress: Callable[[int, int], None] | None, task_timeout_seconds: float) -> list[str]:
    """Run every job (in worker processes unless one process), report progress; returns the clips' relative paths."""
    clips: list[str] = []
    next_log = 0.1

    def finished(number: int, written: list[str]) -> None:
        nonlocal next_log
        if number < 0:
            return  # background noise
        clips.extend(written)
        if progress is not None:
            progress(len(clips), total)
        if len(clips) / total >= next_log - 1e-9 or len(clips) == total:
            log.info("synthesized %d/%d utterances (%.0f %%)", len(clips), total, 100 * len(clips) / total)
            next_log = np.floor(len(clips) / total * 10 + 1e-9) / 10 + 0.1

    if processes == 1:
        for job in jobs:
            finished(*_do(job))
    else:
        _run_in_workers(jobs, processes, task_timeout_seconds, finished)
    return sorted(clips)


class _Worker(NamedTuple):
    process: multiprocessing.process.BaseProcess
    connection: Connection  # this end of the worker's pipe


def _run_in_workers(jobs: list[_SpeakerJob | _NoiseJob], processes: int, task_timeout_seconds: float,
                    finished: Callable[[int, list[str]], None]) -> None:
    """Run the jobs on ``processes`` spawned workers, one job per worker at a time, passing results to ``finished``.

    A worker that dies, or a job without a result after ``task_timeout_seconds``, raises SynthesisWorkerError
    naming the job's speaker; a job's own exception is raised here. Every worker has ended when this returns.
    """
    # spawn, not fork: a forked worker would inherit this process's signal handlers (after a Horovod run, ones
    # that ignore SIGTERM), its threads' held locks and its open sockets.
    context = multiprocessing.get_context("spawn")
    waiting = list(reversed(jobs))
    workers: list[_Worker] = []
    running: dict[_Worker, tuple[_SpeakerJob | _NoiseJob, float]] = {}  # worker → (its job, deadline)

    def hand_out(worker: _Worker) -> None:
        if waiting:
            job = waiting.pop()
            worker.connection.send(job)
            running[worker] = (job, time.monotonic() + task_timeout_seconds)

    try:
        for _ in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve_jobs, args=(theirs,), name="cloudburst-synthesis", daemon=True)
            process.start()
            theirs.close()
            workers.append(_Worker(process, ours))
        for worker in workers:
            hand_out(worker)
        while running:
            nearest = min(deadline for _, deadline in running.values())
            wait([worker.connection for worker in running] + [worker.process.sentinel for worker in running],
                 timeout=max(0.0, nearest - time.monotonic()))
            for worker, (job, deadline) in list(running.items()):
                if worker.connection.poll():
                    try:
                        outcome, value = worker.connection.recv()
                    except EOFError:
                        raise _worker_died(worker, job) from None
                    del running[worker]
                    if outcome == "failed":
                        raise value
                    finished(*value)
                    hand_out(worker)
                elif not worker.process.is_alive():
                    raise _worker_died(worker, job)
                elif time.monotonic() >= deadline:
                    raise SynthesisWorkerError(
                        f"{_describe(job)}: no result after {task_timeout_seconds:g} s, so its synthesis worker "
                        f"(pid {worker.process.pid}) was stopped; is a TTS engine stuck?")
    finally:
        _stop_workers(workers, busy=set(running))


def _worker_died(worker: _Worker, job: _SpeakerJob | _NoiseJob) -> SynthesisWorkerError:
    worker.process.join(5)
    code = worker.process.exitcode
    how = f"exit code {code}"
    if code is not None and code < 0:
        try:
            how = f"killed by {Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    return SynthesisWorkerError(f"{_describe(job)}: its synthesis worker (pid {worker.process.pid}) died ({how}) "
                                "before finishing; SIGKILL is often the kernel's out-of-memory killer")


def _stop_workers(workers: list[_Worker], busy: set[_Worker]) -> None:
    """End every worker: idle ones leave when their pipe closes, busy (possibly stuck) ones are killed."""
    for worker in workers:
        worker.connection.close()
        if worker in busy:
            worker.process.kill()
    deadline = time.monotonic() + 5
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.process.close()


def _write_lists(staging: Path, clips: list[str]) -> None:
    """validation_list.txt and testing_list.txt by Speech Commands' own rule (training is everything else)."""
    for split, name in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        chosen = [clip for clip in clips if which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE) == split]
        (staging / name).write_text("".join(f"{clip}\n" for clip in chosen))


def _report(roster: list[Speaker], clips: list[str], seconds: float, engines: set[str],
            processes: int) -> dict[str, Any]:
    """The manifest's content fields (the recipe, file list and creation time are storage.publish's)."""
    splits = {"training": 0, "validation": 0, "testing": 0}
    for clip in clips:
        splits[which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE)] += 1
    engine_counts: dict[str, int] = {}
    for speaker in roster:
        engine_counts[speaker.engine] = engine_counts.get(speaker.engine, 0) + 1
    return {
        "speakers": len(roster),
        "utterances": len(clips),
        "seconds": round(seconds, 2),
        "utterances_per_second": round(len(clips) / seconds, 1),
        "processes": processes,
        "engines": dict(sorted(engine_counts.items())),
        "engine_versions": engine_versions(engines),
        "splits": splits,
        "sample_rate": SAMPLE_RATE,
        "background_noise": {f"{name}.wav": seconds for name, seconds in BACKGROUND_SECONDS.items()},
        "speaker_voices": [{"speaker": s.speaker_id, "engine": s.engine, "voice": s.voice, "warp": s.warp}
                           for s in roster],
    }


def _readme(recipe: dict[str, Any]) -> str:
    return (
        "Synthetic Speech Commands corpus, generated offline by Cloudburst "
        "(training/datasets/speech_synthesis.py).\n"
        f"Recipe: {json.dumps(recipe, sort_keys=True)}\n"
        "Voices are TTS engines (espeak-ng, flite, festival) with per-speaker variants and a vocal-tract warp: "
        "distinguishable speakers, but far less varied than real people.\n"
        f"Layout as Speech Commands: <word>/<speaker>_nohash_<n>.wav, {BACKGROUND_NOISE}/, validation_list.txt, "
        f"testing_list.txt; {storage.MANIFEST_NAME} (with the synthesis report) is written last.\n"
    )


# --- Command line --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dest", default=None,
                        help="output directory (default: "
                             f"{REPO_ROOT / 'var' / 'corpora'}/speech-commands-synthetic-s<speakers>-r<repetitions>"
                             "-seed<seed>)")
    parser.add_argument("--speakers", type=int, default=100, help="synthetic speakers (default: %(default)s)")
    parser.add_argument("--words", default=None,
                        help=f"comma-separated words (default: all {len(ALL_WORDS)} Speech Commands v0.02 words)")
    parser.add_argument("--repetitions", type=int, default=2,
                        help="utterances per speaker of each keyword; other words get one (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default: %(default)s)")
    parser.add_argument("--processes", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--overwrite", action="store_true", help="replace a different corpus at --dest")


def run(args: argparse.Namespace) -> Path:
    """Synthesize the corpus the arguments describe and print a one-line summary; returns its directory."""
    destination = Path(args.dest) if args.dest else default_corpus_dir(args.speakers, args.repetitions, args.seed)
    words = tuple(word.strip() for word in args.words.split(",") if word.strip()) if args.words else ALL_WORDS
    report = synthesize_corpus(destination, speakers=args.speakers, words=words, repetitions=args.repetitions,
                               seed=args.seed, processes=args.processes, overwrite=args.overwrite)
    print(f"{report['utterances']} utterances from {report['speakers']} speakers "
          f"(engines {report['engines']}) in {report['seconds']:.1f} s, {report['utterances_per_second']:.1f} utt/s "
          f"→ {destination}", flush=True)
    return destination
