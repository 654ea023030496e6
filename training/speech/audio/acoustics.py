"""What happens to speech between a mouth and a file: the room, the microphone and the channel.

A synthetic utterance is dry, full-band studio audio; real keyword clips are not. ``reverberate`` convolves with a
synthetic room impulse response (a direct path, a few early reflections and an exponentially decaying noise tail
whose decay time is the asked RT60); ``apply_channel`` gives a microphone colour (gentle peaking filters), band
limits, and for some channels narrow-band telephone speech (8 kHz, 300–3400 Hz, 8-bit µ-law, back to the clip rate).
``random_room`` and ``random_channel`` draw one speaker's conditions; ``vary_room`` and ``vary_channel`` the small
changes between that speaker's utterances. numpy/scipy only; every random choice comes from the caller's Generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import signal

DECAY_DB = 60.0  # RT60: the time the energy takes to fall by 60 dB
TELEPHONE_RATE = 8000
TELEPHONE_BAND_HZ = (300.0, 3400.0)
MU_LAW = 255.0  # G.711 µ-law
MU_LAW_LEVELS = 256  # 8 bits


@dataclass(frozen=True)
class Room:
    """A reverberant room as one listener hears it: decay time and how much louder the direct sound is."""

    rt60_seconds: float
    direct_to_reverberant_db: float


@dataclass(frozen=True)
class PeakingFilter:
    """One bell of a microphone's frequency response (RBJ audio-EQ peaking filter)."""

    centre_hz: float
    gain_db: float
    q: float


@dataclass(frozen=True)
class Channel:
    """Microphone and transmission: colour, band limits (None: none) and whether it is a telephone line."""

    colour: tuple[PeakingFilter, ...] = ()
    high_pass_hz: float | None = None
    low_pass_hz: float | None = None
    telephone: bool = False


# --- Drawing conditions --------------------------------------------------------------------------------------


def random_room(rng: np.random.Generator, dry_probability: float = 0.25) -> Room | None:
    """A room for one speaker, or None (a close microphone: no audible reverberation); RT60 0.1–0.9 s."""
    if rng.random() < dry_probability:
        return None
    rt60 = math.exp(rng.uniform(math.log(0.1), math.log(0.9)))  # log-uniform: small rooms are the common case
    return Room(rt60_seconds=round(rt60, 3), direct_to_reverberant_db=round(float(rng.uniform(-2, 14)), 2))


def random_channel(rng: np.random.Generator, telephone: bool = False) -> Channel:
    """A microphone and channel for one speaker: 1–3 gentle bells (±5 dB), often a high-pass, sometimes a low-pass
    (unless it is a ``telephone`` line, which has its own band)."""
    colour = tuple(PeakingFilter(centre_hz=round(math.exp(rng.uniform(math.log(120), math.log(6500))), 1),
                                 gain_db=round(float(rng.uniform(-5, 5)), 2), q=round(float(rng.uniform(0.5, 2)), 2))
                   for _ in range(int(rng.integers(1, 4))))
    high_pass = round(math.exp(rng.uniform(math.log(50), math.log(300))), 1) if rng.random() < 0.5 else None
    low_pass = round(math.exp(rng.uniform(math.log(3500), math.log(7500))), 1) \
        if not telephone and rng.random() < 0.35 else None
    return Channel(colour, high_pass, low_pass, telephone)


def vary_room(room: Room, rng: np.random.Generator) -> Room:
    """The same room from a slightly different spot: RT60 ±5 %, direct-to-reverberant ratio ±1.5 dB."""
    return Room(rt60_seconds=room.rt60_seconds * float(rng.uniform(0.95, 1.05)),
                direct_to_reverberant_db=room.direct_to_reverberant_db + float(rng.uniform(-1.5, 1.5)))


def vary_channel(channel: Channel, rng: np.random.Generator) -> Channel:
    """The same microphone held a little differently: each bell's gain ±0.5 dB, band edges ±3 %."""
    colour = tuple(replace(bell, gain_db=bell.gain_db + float(rng.uniform(-0.5, 0.5))) for bell in channel.colour)
    high_pass = channel.high_pass_hz * float(rng.uniform(0.97, 1.03)) if channel.high_pass_hz else None
    low_pass = channel.low_pass_hz * float(rng.uniform(0.97, 1.03)) if channel.low_pass_hz else None
    return Channel(colour, high_pass, low_pass, channel.telephone)


# --- Room ----------------------------------------------------------------------------------------------------


def room_impulse_response(room: Room, rng: np.random.Generator, sample_rate: int) -> np.ndarray:
    """A synthetic impulse response: a unit direct path, a few early reflections, then Gaussian noise whose energy
    falls 60 dB in ``room.rt60_seconds`` (a diffuse field), darkened a little (walls absorb highs), scaled so that
    direct / reverberant energy is ``room.direct_to_reverberant_db``; it ends where the decay reaches -60 dB."""
    length = max(2, int(round(room.rt60_seconds * sample_rate)))
    t = np.arange(length) / sample_rate
    # Amplitude falls 60 dB (energy 1e-6) in rt60 seconds: exp(-ln(1000) t / rt60).
    envelope = np.exp(-math.log(10 ** (DECAY_DB / 20)) * t / room.rt60_seconds)
    pole = rng.uniform(0.2, 0.6)
    tail = signal.lfilter([1 - pole], [1, -pole], rng.standard_normal(length)) * envelope
    # The diffuse field builds up over a few milliseconds after the direct sound.
    tail *= 1 - np.exp(-t / rng.uniform(0.002, 0.008))
    for _ in range(int(rng.integers(3, 7))):  # early reflections off the nearest surfaces
        delay = int(rng.uniform(0.002, 0.03) * sample_rate)
        if delay < length:
            tail[delay] += rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0) * envelope[delay] * tail.std()
    tail *= math.sqrt(10 ** (-room.direct_to_reverberant_db / 10) / max(float(np.sum(tail**2)), 1e-20))
    tail[0] = 1.0  # the direct path
    return tail


def reverberate(samples: np.ndarray, room: Room, rng: np.random.Generator, sample_rate: int) -> np.ndarray:
    """``samples`` heard in ``room``: the full convolution (longer than the input by the impulse response)."""
    return signal.fftconvolve(samples, room_impulse_response(room, rng, sample_rate))


def reverberation_time(impulse_response: np.ndarray, sample_rate: int,
                       fit_db: tuple[float, float] = (-5.0, -25.0)) -> float:
    """RT60 (seconds) measured as ISO 3382's T20: Schroeder's backward-integrated energy decay curve, a straight
    line fitted between its -5 and -25 dB points, extrapolated to -60 dB."""
    energy = np.cumsum(np.asarray(impulse_response, dtype=np.float64)[::-1] ** 2)[::-1]
    if energy[0] <= 0:
        raise ValueError("the impulse response is all zeros")
    decay_db = 10 * np.log10(np.maximum(energy / energy[0], 1e-30))
    upper, lower = fit_db
    inside = np.flatnonzero((decay_db <= upper) & (decay_db >= lower))
    if inside.size < 2:
        raise ValueError(f"the energy decay curve does not span {upper:g} to {lower:g} dB")
    slope_db_per_second, _ = np.polyfit(inside / sample_rate, decay_db[inside], 1)
    return -DECAY_DB / slope_db_per_second


# --- Microphone and channel ----------------------------------------------------------------------------------


def peaking_filter(bell: PeakingFilter, sample_rate: int) -> np.ndarray:
    """Second-order sections of an RBJ audio-EQ-cookbook peaking filter."""
    amplitude = 10 ** (bell.gain_db / 40)
    omega = 2 * math.pi * min(bell.centre_hz, 0.45 * sample_rate) / sample_rate
    alpha = math.sin(omega) / (2 * bell.q)
    b = [1 + alpha * amplitude, -2 * math.cos(omega), 1 - alpha * amplitude]
    a = [1 + alpha / amplitude, -2 * math.cos(omega), 1 - alpha / amplitude]
    return signal.tf2sos(np.array(b) / a[0], np.array(a) / a[0])


def mu_law_round_trip(samples: np.ndarray) -> np.ndarray:
    """``samples`` (in [-1, 1]) through 8-bit µ-law companding and back: a telephone line's quantisation."""
    clipped = np.clip(samples, -1.0, 1.0)
    compressed = np.sign(clipped) * np.log1p(MU_LAW * np.abs(clipped)) / math.log1p(MU_LAW)
    step = 2 / (MU_LAW_LEVELS - 1)
    quantised = np.round(compressed / step) * step
    return np.sign(quantised) * np.expm1(np.abs(quantised) * math.log1p(MU_LAW)) / MU_LAW


def telephone_band(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Narrow-band telephone speech: down to 8 kHz, 300–3400 Hz, 8-bit µ-law, back to ``sample_rate``."""
    ratio = math.gcd(TELEPHONE_RATE, sample_rate)
    narrow = signal.resample_poly(samples, TELEPHONE_RATE // ratio, sample_rate // ratio)
    band = signal.butter(4, TELEPHONE_BAND_HZ, btype="bandpass", fs=TELEPHONE_RATE, output="sos")
    narrow = signal.sosfilt(band, narrow)
    # µ-law quantises relative to full scale: companding at the signal's own peak keeps quiet clips intelligible.
    peak = max(float(np.abs(narrow).max()), 1e-12)
    narrow = mu_law_round_trip(narrow / peak) * peak
    wide = signal.resample_poly(narrow, sample_rate // ratio, TELEPHONE_RATE // ratio)
    return wide[: len(samples)]


def apply_channel(samples: np.ndarray, channel: Channel, sample_rate: int) -> np.ndarray:
    """``samples`` through the microphone's colour, the band limits and (if any) the telephone line."""
    out = np.asarray(samples, dtype=np.float64)
    for bell in channel.colour:
        out = signal.sosfilt(peaking_filter(bell, sample_rate), out)
    if channel.high_pass_hz:
        out = signal.sosfilt(signal.butter(2, channel.high_pass_hz, btype="highpass", fs=sample_rate,
                                           output="sos"), out)
    if channel.low_pass_hz:
        out = signal.sosfilt(signal.butter(4, min(channel.low_pass_hz, 0.45 * sample_rate), btype="lowpass",
                                           fs=sample_rate, output="sos"), out)
    if channel.telephone:
        out = telephone_band(out, sample_rate)
    return out
