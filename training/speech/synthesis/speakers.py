"""Synthetic speakers: ids, voice variants, tempo, pitch and acoustics drawn from seeded generators, and the
per-utterance generators every random draw of an utterance comes from."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from training.speech.audio import acoustics
from training.speech.audio.acoustics import Channel, Room
from training.speech.speech_commands import KEYWORDS
from training.speech.synthesis.voices import ESPEAK, ESPEAK_NG, MBROLA, PICO, RHVOICE, Voice, speaker_voice

# What a speaker adds after the word: it changes the intonation (flite and festival mostly ignore it).
ENDINGS, ENDING_WEIGHTS = (".", "!", ",", "?"), (0.5, 0.25, 0.15, 0.1)
# Streams of the per-purpose random generators (the first key), so no two purposes ever share draws.
SPEAKER_STREAM, UTTERANCE_STREAM, NOISE_STREAM, SPEAKER_ACOUSTICS_STREAM, UTTERANCE_ACOUSTICS_STREAM = 1, 2, 3, 4, 5
TELEPHONE_EVERY = 9  # one speaker in nine (numbers 4, 13, 22, …) speaks through a telephone line


@dataclass(frozen=True)


class Speaker:
    """One synthetic speaker: voice, and the per-speaker settings its utterances start from."""

    number: int
    speaker_id: str  # 8 lowercase hex characters, like Speech Commands' ids
    voice: Voice
    warp: float  # vocal-tract warp: > 1 lowers formants and pitch
    tempo: float  # espeak(-ng)/mbrola: words per minute; flite/festival: duration stretch; pico/rhvoice: rate %
    pitch: float  # espeak(-ng)/mbrola: -p (0–99); flite/festival: target mean F0 in Hz; pico/rhvoice: pitch %
    variant: str = ""  # espeak-ng/espeak: the variant file's text
    room: Room | None = None  # None: dry (a close microphone)
    channel: Channel = field(default_factory=Channel)

    @property
    def engine(self) -> str:
        return self.voice.engine

    @property
    def family(self) -> str:
        return self.voice.family

    @property
    def variant_name(self) -> str:
        return f"cb-{self.speaker_id}"


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
    """Speaker ``number``: its voice by the fixed rotation, everything else drawn from the seed."""
    voice = speaker_voice(number)
    rng = np.random.default_rng([SPEAKER_STREAM, seed, number])
    warp = round(float(rng.uniform(0.9, 1.1)), 4)
    surroundings = np.random.default_rng([SPEAKER_ACOUSTICS_STREAM, seed, number])
    room = acoustics.random_room(surroundings)
    # Telephone speech by a fixed rotation, not a draw, so that even a small corpus has some (period coprime with
    # the voice rotation's, so every voice group gets telephone speakers).
    channel = acoustics.random_channel(surroundings, telephone=number % TELEPHONE_EVERY == TELEPHONE_EVERY // 2)

    def speaker(tempo: float, pitch: float, variant: str = "") -> Speaker:
        return Speaker(number, speaker_id, voice, warp, round(tempo, 3), round(pitch, 1), variant, room, channel)

    if voice.engine in (ESPEAK_NG, ESPEAK):
        klatt_models = 5 if voice.engine == ESPEAK_NG else 3  # espeak 1.48 knows fewer glottal sources
        return speaker(float(rng.uniform(140, 195)), 50.0,
                       espeak_variant(rng, f"cb-{speaker_id}", klatt_models=klatt_models))
    if voice.engine == MBROLA:  # diphones: only pitch and tempo move (and the warp)
        return speaker(float(rng.uniform(130, 185)), float(rng.integers(25, 76)))
    if voice.engine in (PICO, RHVOICE):  # percentages of the voice's own rate and pitch
        return speaker(float(rng.uniform(85, 120)), float(rng.uniform(75, 130)))
    return speaker(float(rng.uniform(0.85, 1.2)), _f0_mean(rng, voice.gender))  # flite, festival


def _f0_mean(rng: np.random.Generator, gender: str) -> float:
    return float(rng.uniform(150, 230) if gender == "female" else rng.uniform(85, 140))


def espeak_variant(rng: np.random.Generator, name: str, klatt_models: int = 5) -> str:
    """The text of an espeak-ng/espeak variant file: a random but plausible male or female voice quality."""
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
        lines.append(f"klatt {rng.integers(1, klatt_models + 1)}")
    return "\n".join(lines) + "\n"


def word_key(word: str) -> int:
    """A stable number for a word (not its position in the list), so subsets of words share clips."""
    return int(hashlib.sha1(word.encode()).hexdigest()[:8], 16)


def utterance_rng(seed: int, speaker_number: int, word: str, repetition: int,
                  stream: int = UTTERANCE_STREAM) -> np.random.Generator:
    return np.random.default_rng([stream, seed, speaker_number, word_key(word), repetition])


def utterance_plan(words: Sequence[str], repetitions: int) -> list[tuple[str, int]]:
    """(word, repetition) for one speaker: keywords ``repetitions`` times, other words once."""
    return [(word, repetition) for word in words for repetition in range(repetitions if word in KEYWORDS else 1)]
