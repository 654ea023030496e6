"""The corpus' ``_background_noise_`` recordings: coloured noise, a running tap, mains hum and babble of many
voices, each deterministic for its name and seed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import signal

from training.speech.speech_commands import SAMPLE_RATE
from training.speech.synthesis.acoustics import resample, to_int16
from training.speech.synthesis.engines import espeak
from training.speech.synthesis.speakers import NOISE_STREAM, espeak_variant

# Babble is made of words outside the Speech Commands vocabulary, so it never says a keyword.
BABBLE_WORDS = ("the", "and", "we", "could", "maybe", "tomorrow", "kitchen", "really", "people", "later", "coffee",
                "because", "window", "little", "after", "never", "about", "water", "morning", "think", "paper",
                "table", "always", "garden", "music", "friday", "station", "hello", "thanks", "please", "money",
                "over", "there", "where", "number", "today", "evening", "dinner", "market", "letter")
BABBLE_TALKERS = 6
BABBLE_ACCENTS = ("en-us", "en-us", "en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc")
# name → seconds; Speech Commands' own noises are about a minute each.
BACKGROUND_SECONDS = {"white_noise": 60, "pink_noise": 60, "brown_noise": 45, "running_tap": 60, "mains_hum": 30,
                      "babble": 40}


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
        accent = str(rng.choice(BABBLE_ACCENTS))
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
