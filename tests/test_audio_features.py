"""Keyword-spotting audio: log-mel/MFCC features (checked against the mel scale and scipy's DCT) and the
training-time augmentation (time shift, background noise at a drawn SNR)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import fft

from training.speech.audio import features
from training.speech.augment import audio

RATE = 16_000
SAMPLES = 16_000


def tone(frequency_hz: float, amplitude: float = 0.5, phase: float = 0.0) -> np.ndarray:
    """One second of a sine as float64 in [-1, 1]."""
    return amplitude * np.sin(2 * np.pi * frequency_hz * np.arange(SAMPLES) / RATE + phase)


def to_int16(waveforms: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(waveforms) * 32768), -32768, 32767).astype(np.int16)


def hz_to_mel(frequency_hz: np.ndarray) -> np.ndarray:
    """The HTK mel scale, written independently of tf.signal's ``1127·ln`` form."""
    return 2595.0 * np.log10(1.0 + np.asarray(frequency_hz) / 700.0)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (np.asarray(mel) / 2595.0) - 1.0)


# --- Features ----------------------------------------------------------------------------------------------


def test_one_second_clips_give_98_frames_by_40_bands():
    assert features.feature_shape("log_mel") == (98, 40)
    assert features.feature_shape("mfcc") == (98, features.MFCC_COEFFICIENTS) == (98, 40)
    clips = to_int16(np.stack([tone(440.0), tone(2000.0), np.zeros(SAMPLES)]))
    log_mel = features.compute_features(clips)
    assert log_mel.shape == (3, 98, 40) and log_mel.dtype == np.float32
    assert np.all(np.isfinite(log_mel))


def test_a_1khz_sine_peaks_in_the_band_whose_centre_is_nearest_1khz():
    edges_mel = np.linspace(hz_to_mel(features.LOWER_HZ), hz_to_mel(features.UPPER_HZ), features.MEL_BANDS + 2)
    centres_hz = mel_to_hz(edges_mel[1:-1])
    expected_band = int(np.argmin(np.abs(centres_hz - 1000.0)))
    log_mel = features.compute_features(to_int16(tone(1000.0)[None]))
    assert int(np.argmax(log_mel[0].mean(axis=0))) == expected_band
    assert 900 < centres_hz[expected_band] < 1100  # the expectation itself is sane


def test_silence_is_lowest_and_ten_times_the_amplitude_adds_ln_100_everywhere():
    noise = np.random.default_rng(0).normal(0.0, 1.0, SAMPLES)
    clips = np.stack([np.zeros(SAMPLES), 0.01 * noise, 0.1 * noise]).astype(np.float32)
    silence, quiet, loud = features.compute_features(clips)
    np.testing.assert_allclose(silence, np.log(features.LOG_OFFSET), rtol=1e-6)
    assert silence.max() < quiet.min()
    # Power scales with amplitude squared; the 1e-6 offset is negligible against noise power here.
    np.testing.assert_allclose(loud - quiet, np.log(100.0), atol=0.01)


def test_int16_and_the_same_clips_as_floats_give_identical_features():
    clips = np.random.default_rng(1).integers(-20_000, 20_000, (4, SAMPLES)).astype(np.int16)
    from_int16 = features.compute_features(clips)
    from_float32 = features.compute_features(clips.astype(np.float32) / 32768)
    from_float64 = features.compute_features(clips / 32768.0)
    np.testing.assert_array_equal(from_int16, from_float32)
    np.testing.assert_array_equal(from_int16, from_float64)


def test_results_do_not_depend_on_the_batch_size_and_repeated_calls_do_not_retrace():
    clips = np.random.default_rng(2).integers(-5_000, 5_000, (7, SAMPLES)).astype(np.int16)
    whole = features.compute_features(clips)
    traces = features._log_mel.experimental_get_tracing_count()
    in_threes = features.compute_features(clips, batch_size=3)
    features.compute_features(clips[:1])
    assert features._log_mel.experimental_get_tracing_count() == traces
    np.testing.assert_allclose(in_threes, whole, atol=1e-4)


def test_mfccs_are_the_scaled_dct_ii_of_the_log_mel_map():
    clips = to_int16(np.stack([tone(300.0) + 0.1 * tone(3100.0), tone(1700.0, amplitude=0.05)]))
    log_mel = features.compute_features(clips, "log_mel")
    mfcc = features.compute_features(clips, "mfcc")
    assert mfcc.shape == (2, 98, 40) and mfcc.dtype == np.float32
    # tf.signal's MFCCs: the unnormalised DCT-II over bands divided by sqrt(2 · bands).
    expected = fft.dct(log_mel.astype(np.float64), type=2, axis=-1) / np.sqrt(2 * features.MEL_BANDS)
    np.testing.assert_allclose(mfcc, expected[..., : features.MFCC_COEFFICIENTS], atol=1e-3)


def test_empty_input_gives_an_empty_feature_array():
    assert features.compute_features(np.zeros((0, SAMPLES), np.int16)).shape == (0, 98, 40)


@pytest.mark.parametrize(
    ("clips", "kind", "message"),
    [
        (np.zeros(SAMPLES, np.int16), "log_mel", r"shape \(n, 16000\)"),
        (np.zeros((2, 8000), np.int16), "log_mel", r"shape \(n, 16000\)"),
        (np.zeros((2, SAMPLES), np.int32), "log_mel", "int16 PCM or floating-point"),
        (np.full((2, SAMPLES), 1000.0), "log_mel", "divide by 32768"),
        (np.full((2, SAMPLES), np.nan), "log_mel", "NaN"),
        (np.zeros((2, SAMPLES), np.int16), "spectrogram", "unknown feature kind 'spectrogram'"),
    ],
)
def test_bad_inputs_are_rejected_with_the_reason(clips, kind, message):
    with pytest.raises(ValueError, match=message):
        features.compute_features(clips, kind)


def test_bad_batch_size_and_kind_are_rejected():
    with pytest.raises(ValueError, match="batch_size"):
        features.compute_features(np.zeros((1, SAMPLES), np.int16), batch_size=0)
    with pytest.raises(ValueError, match="unknown feature kind"):
        features.feature_shape("mel")


# --- Augmentation ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clips() -> np.ndarray:
    """Eight distinct speech-like clips: tones with a slow amplitude envelope."""
    envelope = np.sin(np.pi * np.arange(SAMPLES) / SAMPLES)
    return to_int16(np.stack([0.3 * envelope * tone(200.0 + 150.0 * number, 1.0) for number in range(8)]))


@pytest.fixture(scope="module")
def noises() -> list[np.ndarray]:
    """Two background recordings of different length and type: Gaussian int16 and a float 'hum'."""
    rng = np.random.default_rng(3)
    hiss = to_int16(rng.normal(0.0, 0.1, 3 * SAMPLES))
    hum = (0.2 * np.sin(2 * np.pi * 50.0 * np.arange(int(1.5 * SAMPLES)) / RATE)).astype(np.float32)
    return [hiss, hum]


def test_same_seed_index_and_copy_give_identical_bytes_whatever_the_batch(clips, noises):
    index = np.arange(100, 108)
    copy = np.ones(8, np.int64)
    batch = audio.augment_clips(clips, index, copy, seed=7, noises=noises)
    assert batch.dtype == np.int16 and batch.shape == clips.shape
    one_by_one = np.concatenate(
        [audio.augment_clips(clips[row : row + 1], index[row : row + 1], copy[:1], seed=7, noises=noises)
         for row in range(8)]
    )
    order = np.random.default_rng(0).permutation(8)
    shuffled = audio.augment_clips(clips[order], index[order], copy[order], seed=7, noises=noises)
    assert batch.tobytes() == one_by_one.tobytes()
    assert np.array_equal(shuffled, batch[order])
    assert not np.array_equal(batch, clips)


def test_different_copies_or_seeds_give_different_clips(clips, noises):
    index = np.arange(8)
    first = audio.augment_clips(clips, index, np.full(8, 1), seed=7, noises=noises)
    second = audio.augment_clips(clips, index, np.full(8, 2), seed=7, noises=noises)
    other_seed = audio.augment_clips(clips, index, np.full(8, 1), seed=8, noises=noises)
    for row in range(8):
        assert not np.array_equal(first[row], second[row])
        assert not np.array_equal(first[row], other_seed[row])


def test_zero_shift_and_no_noise_leave_clips_unchanged(clips):
    unchanged = audio.augment_clips(clips, np.arange(8), np.zeros(8, np.int64), seed=1, noises=[],
                                    max_shift_ms=0.0, noise_probability=0.0)
    assert np.array_equal(unchanged, clips)
    assert unchanged is not clips


def test_the_shift_moves_an_impulse_by_at_most_100_ms_both_ways():
    count = 64
    impulses = np.zeros((count, SAMPLES), np.int16)
    impulses[:, 8000] = 10_000
    shifted = audio.augment_clips(impulses, np.arange(count), np.ones(count, np.int64), seed=5, noises=[],
                                  noise_probability=0.0)
    assert np.all(np.count_nonzero(shifted, axis=1) == 1)  # moved, zero-filled, never duplicated
    offsets = np.argmax(shifted != 0, axis=1) - 8000
    assert np.all(np.abs(offsets) <= 1600)
    assert offsets.min() < -400 and offsets.max() > 400  # both directions, over a good part of the range


def test_noise_is_mixed_at_the_drawn_snr(clips, noises):
    index = np.arange(8)
    noisy = audio.augment_clips(clips, index, np.ones(8, np.int64), seed=3, noises=noises, max_shift_ms=0.0,
                                snr_db=(10.0, 10.0), noise_probability=1.0)
    clean = clips.astype(np.float64)
    added = noisy.astype(np.float64) - clean
    measured_db = 10 * np.log10(np.mean(clean**2, axis=1) / np.mean(added**2, axis=1))
    np.testing.assert_allclose(measured_db, 10.0, atol=0.5)


def test_loud_mixes_saturate_instead_of_wrapping_around():
    loud = np.full((2, SAMPLES), 30_000, np.int16)
    loud[1] = -30_000
    direct_current = [np.ones(SAMPLES, np.float32)]  # the noise has the clip's sign on row 0, the opposite on row 1
    mixed = audio.augment_clips(loud, np.arange(2), np.zeros(2, np.int64), seed=0, noises=direct_current,
                                max_shift_ms=0.0, snr_db=(0.0, 0.0), noise_probability=1.0)
    assert mixed.dtype == np.int16
    assert np.all(mixed[0] == 32767)  # 30000 + 30000 would wrap to a negative number
    assert np.all(mixed[1] == 0)  # -30000 + 30000


def test_a_silent_clip_stays_silent_because_its_snr_is_undefined(noises):
    silent = np.zeros((1, SAMPLES), np.int16)
    mixed = audio.augment_clips(silent, np.arange(1), np.ones(1, np.int64), seed=0, noises=noises,
                                max_shift_ms=0.0, noise_probability=1.0)
    assert not mixed.any()


def test_noise_probability_above_zero_needs_noises(clips):
    with pytest.raises(ValueError, match="at least one background noise"):
        audio.augment_clips(clips, np.arange(8), np.ones(8, np.int64), seed=0, noises=[])


def test_short_or_multichannel_noises_are_rejected(clips):
    for bad in (np.zeros(SAMPLES - 1, np.int16), np.zeros((2, SAMPLES), np.int16)):
        with pytest.raises(ValueError, match=r"noise 0: expected a 1-D recording of ≥ 16000"):
            audio.augment_clips(clips, np.arange(8), np.ones(8, np.int64), seed=0, noises=[bad])


def test_clips_index_and_copy_are_checked(clips, noises):
    with pytest.raises(ValueError, match="int16 clips"):
        audio.augment_clips(clips.astype(np.float32), np.arange(8), np.ones(8, np.int64), seed=0, noises=noises)
    with pytest.raises(ValueError, match="one entry per clip"):
        audio.augment_clips(clips, np.arange(7), np.ones(8, np.int64), seed=0, noises=noises)
    with pytest.raises(ValueError, match="index must hold integers ≥ 0"):
        audio.augment_clips(clips, np.arange(8) - 1, np.ones(8, np.int64), seed=0, noises=noises)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_shift_ms": -1.0}, "max_shift_ms"),
        ({"max_shift_ms": 600.0}, "max_shift_ms"),
        ({"max_shift_ms": float("nan")}, "max_shift_ms"),
        ({"snr_db": (20.0, 0.0)}, "low ≤ high"),
        ({"snr_db": (0.0, float("inf"))}, "finite"),
        ({"snr_db": (5.0,)}, "two finite numbers"),
        ({"noise_probability": 1.5}, "noise_probability"),
        ({"noise_probability": float("nan")}, "noise_probability"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"copies": -2}, "copies"),
    ],
)
def test_bad_parameters_are_rejected_by_name(arguments, message):
    parameters = {"max_shift_ms": audio.DEFAULT_MAX_SHIFT_MS, "snr_db": audio.DEFAULT_SNR_DB,
                  "noise_probability": audio.DEFAULT_NOISE_PROBABILITY} | arguments
    with pytest.raises(ValueError, match=message):
        audio.validate_parameters(**parameters)
