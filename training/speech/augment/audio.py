"""Training-time audio augmentation for keyword spotting: a random time shift, then background noise at a random SNR.

As in Speech Commands' own input pipeline, the shift is uniform in ±``max_shift_ms`` with zero fill, and a
random one-second segment of a random background-noise recording is mixed in with probability
``noise_probability``. Here the noise level is set by a signal-to-noise ratio drawn uniformly from ``snr_db``
(from the RMS powers of the shifted clip and the segment), so quiet and loud speakers get the same range of
difficulty. Every random draw for an example comes from a generator seeded by (seed, example index, copy), so its
result never depends on which batch, partition or retry computed it: re-runs write identical bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from training.speech.constants import SAMPLE_RATE

DEFAULT_MAX_SHIFT_MS = 100.0
DEFAULT_SNR_DB = (0.0, 20.0)
DEFAULT_NOISE_PROBABILITY = 0.8
MAX_SHIFT_LIMIT_MS = 500.0  # half a clip: a larger shift would push most words out of the window
CLIP_SAMPLES = SAMPLE_RATE  # one second
INT16_MIN, INT16_MAX = -32768, 32767


def validate_parameters(
    max_shift_ms: float,
    snr_db: tuple[float, float],
    noise_probability: float,
    seed: int | None = None,
    copies: int | None = None,
) -> None:
    """Reject parameter values that make no sense, naming the value."""
    if not np.isfinite(max_shift_ms) or not 0 <= max_shift_ms <= MAX_SHIFT_LIMIT_MS:
        raise ValueError(f"max_shift_ms must be a number in [0, {MAX_SHIFT_LIMIT_MS:g}], got {max_shift_ms}")
    if len(snr_db) != 2 or not all(np.isfinite(value) for value in snr_db) or snr_db[0] > snr_db[1]:
        raise ValueError(f"snr_db must be two finite numbers (low, high) with low ≤ high, got {snr_db}")
    if not 0 <= noise_probability <= 1:  # also rejects NaN
        raise ValueError(f"noise_probability must be in [0, 1], got {noise_probability}")
    if seed is not None and (int(seed) != seed or not 0 <= seed < 2**63):
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed}")
    if copies is not None and (int(copies) != copies or copies < 0):
        raise ValueError(f"copies must be an integer ≥ 0, got {copies}")


def augment_clips(
    clips: np.ndarray,
    index: np.ndarray,
    copy: np.ndarray,
    seed: int,
    noises: Sequence[np.ndarray],
    max_shift_ms: float = DEFAULT_MAX_SHIFT_MS,
    snr_db: tuple[float, float] = DEFAULT_SNR_DB,
    noise_probability: float = DEFAULT_NOISE_PROBABILITY,
) -> np.ndarray:
    """Augment int16 clips (n, 16000); example i uses the stream of (seed, index[i], copy[i]). Returns int16."""
    validate_parameters(max_shift_ms, snr_db, noise_probability, seed=seed)
    clips = np.asarray(clips)
    if clips.ndim != 2 or clips.shape[1] != CLIP_SAMPLES or clips.dtype != np.int16:
        raise ValueError(f"expected int16 clips of shape (n, {CLIP_SAMPLES}), got {clips.dtype} {clips.shape}")
    index, copy = np.asarray(index), np.asarray(copy)
    if index.shape != (len(clips),) or copy.shape != (len(clips),):
        raise ValueError(f"index {index.shape} and copy {copy.shape} must be 1-D, one entry per clip ({len(clips)})")
    for name, values in (("index", index), ("copy", copy)):
        if values.size and (not np.issubdtype(values.dtype, np.integer) or values.min() < 0):
            raise ValueError(f"{name} must hold integers ≥ 0, got {values.dtype} with minimum {values.min()}")
    if noise_probability > 0:
        noise_waveforms = _check_noises(noises)
    else:
        noise_waveforms = []
    max_shift = int(max_shift_ms * SAMPLE_RATE / 1000)
    augmented = np.empty_like(clips)
    for row, (clip, example, copy_number) in enumerate(zip(clips, index, copy, strict=True)):
        # One generator per example: the draws never depend on the other rows of the batch.
        rng = np.random.default_rng([seed, int(example), int(copy_number)])
        shifted = shift_clip(clip.astype(np.float64), int(rng.integers(-max_shift, max_shift, endpoint=True)))
        if rng.random() < noise_probability:
            noise = noise_waveforms[rng.integers(len(noise_waveforms))]
            start = int(rng.integers(len(noise) - CLIP_SAMPLES, endpoint=True))
            segment = noise[start : start + CLIP_SAMPLES].astype(np.float64)
            shifted = mix_at_snr(shifted, segment, float(rng.uniform(*snr_db)))
        augmented[row] = np.clip(np.rint(shifted), INT16_MIN, INT16_MAX)  # saturate, never wrap around
    return augmented


def shift_clip(clip: np.ndarray, shift_samples: int) -> np.ndarray:
    """The clip delayed by ``shift_samples`` (advanced when negative), zero-filled, same length."""
    shifted = np.zeros_like(clip)
    if shift_samples >= 0:
        shifted[shift_samples:] = clip[: len(clip) - shift_samples]
    else:
        shifted[:shift_samples] = clip[-shift_samples:]
    return shifted


def mix_at_snr(signal: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """signal + noise scaled so that 10·log10(power(signal) / power(scaled noise)) = snr_db.

    A silent signal or silent noise makes the ratio undefined; the signal is then returned unchanged.
    """
    signal_power = float(np.mean(np.square(signal)))
    noise_power = float(np.mean(np.square(noise)))
    if signal_power == 0 or noise_power == 0:
        return signal.copy()
    scale = math.sqrt(signal_power / (noise_power * 10 ** (snr_db / 10)))
    return signal + scale * noise


def _check_noises(noises: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The background noises as arrays, after checking each is a 1-D recording of at least one second."""
    if noises is None or len(noises) == 0:
        raise ValueError("noise_probability > 0 needs at least one background noise recording "
                         "(pass noises, or set noise_probability=0)")
    waveforms = []
    for number, noise in enumerate(noises):
        noise = np.asarray(noise)
        if noise.ndim != 1 or len(noise) < CLIP_SAMPLES:
            raise ValueError(f"noise {number}: expected a 1-D recording of ≥ {CLIP_SAMPLES} samples "
                             f"(1 s at {SAMPLE_RATE} Hz), got shape {noise.shape}")
        if noise.dtype != np.int16 and not np.issubdtype(noise.dtype, np.floating):
            raise ValueError(f"noise {number}: expected int16 or floating-point samples, got {noise.dtype}")
        # Any scale will do (mixing rescales each segment to the drawn SNR), so no conversion of whole recordings.
        if noise.dtype != np.int16 and not np.all(np.isfinite(noise)):
            raise ValueError(f"noise {number}: contains NaN or infinity")
        waveforms.append(noise)
    return waveforms
