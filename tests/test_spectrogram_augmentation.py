"""Online augmentation of keyword-spotting features: deterministic per seed, fresh per step, within its bounds,
and wired into the strategies' input pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from training.speech.augment import spectrogram
from training.speech.augment.spectrogram import ONLINE_AUGMENTATIONS, make_augmenter, parse_augmentations

tf = pytest.importorskip("tensorflow")

FRAMES, BANDS = 98, 40


def log_mel_batch(size: int = 6, seed: int = 0) -> np.ndarray:
    """Speech-like maps: a loud formant band moving through the middle frames over a quiet floor."""
    rng = np.random.default_rng(seed)
    maps = np.full((size, FRAMES, BANDS), np.log(1e-4), np.float32) + rng.normal(0, 0.1, (size, FRAMES, BANDS))
    for example in range(size):
        start = 25 + example % 20
        for frame in range(start, start + 40):
            band = 8 + (frame - start) // 4
            maps[example, frame, band:band + 4] = np.log(1.0) + rng.normal(0, 0.1, 4)
    return maps.astype(np.float32)


def run(names: tuple[str, ...], batch: np.ndarray, seed: tuple[int, int], kind: str = "log_mel") -> np.ndarray:
    return make_augmenter(names, kind)(tf.constant(batch), tf.constant(seed, tf.int64)).numpy()


def test_names_parse_in_application_order_and_unknown_ones_are_refused():
    assert parse_augmentations("noise,speed") == ("speed", "noise")
    assert parse_augmentations("") == parse_augmentations("none") == ()
    assert make_augmenter(()) is None
    with pytest.raises(ValueError, match="unknown online augmentation reverb"):
        parse_augmentations("speed,reverb")


def test_the_setting_accepts_every_name_and_refuses_others_in_one_line():
    from training.config import RunSpec
    from training.settings import RunSpecError

    workload = "kws_densenet_bilstm"
    RunSpec(workload=workload, online_augmentation=",".join(ONLINE_AUGMENTATIONS)).validate()
    RunSpec(workload=workload, online_augmentation="none").validate()
    for bad in ("reverb", "speed,", "speed, noise", "none,speed", "", "noise\n"):
        with pytest.raises(RunSpecError, match="online_augmentation") as error:
            RunSpec(workload=workload, online_augmentation=bad).validate()
        assert "\n" not in str(error.value).replace(repr(bad), "")


@pytest.mark.parametrize("name", ONLINE_AUGMENTATIONS)
def test_each_augmentation_is_deterministic_per_seed_and_differs_between_steps(name):
    batch = log_mel_batch()
    first = run((name,), batch, (7, 100))
    assert first.shape == batch.shape and first.dtype == np.float32 and np.isfinite(first).all()
    np.testing.assert_array_equal(first, run((name,), batch, (7, 100)))  # same seed, same batch: same result
    assert not np.array_equal(first, run((name,), batch, (7, 101)))  # the next step draws afresh
    assert not np.array_equal(first, run((name,), batch, (8, 100)))  # another worker or run seed too
    if name != "gain":  # gain changes only what sinks under the floor: most values move by the same constant
        assert not np.allclose(first, batch)


def test_masks_stay_within_their_widths_and_are_set_to_the_example_mean():
    batch = log_mel_batch(size=32)
    for seed in range(5):
        masked = run(("time_mask",), batch, (seed, 0))
        changed_frames = (masked != batch).any(axis=2)
        assert changed_frames.sum(axis=1).max() <= spectrogram.TIME_MASKS * spectrogram.MAX_TIME_MASK_FRAMES
        means = batch.mean(axis=(1, 2))
        for example, frames in enumerate(changed_frames):
            np.testing.assert_allclose(masked[example, frames], means[example], rtol=1e-5)
        masked = run(("freq_mask",), batch, (seed, 0))
        changed_bands = (masked != batch).any(axis=1)
        assert changed_bands.sum(axis=1).max() <= spectrogram.FREQ_MASKS * spectrogram.MAX_FREQ_MASK_BANDS
        assert changed_bands.any()


def test_shift_moves_whole_frames_by_at_most_its_bound_and_fills_with_the_floor():
    batch = log_mel_batch(size=16)
    shifted = run(("shift",), batch, (3, 9))
    for example in range(len(batch)):
        matches = [offset for offset in range(-spectrogram.MAX_SHIFT_FRAMES, spectrogram.MAX_SHIFT_FRAMES + 1)
                   if np.allclose(np.roll(batch[example], offset, axis=0)[max(offset, 0):FRAMES + min(offset, 0)],
                                  shifted[example][max(offset, 0):FRAMES + min(offset, 0)])]
        assert matches, f"example {example} is not a whole-frame shift within ±{spectrogram.MAX_SHIFT_FRAMES}"
        offset = matches[0]
        filled = shifted[example][:offset] if offset > 0 else shifted[example][FRAMES + offset:]
        np.testing.assert_allclose(filled, batch[example].min())


def test_speed_moves_the_loud_part_by_no_more_than_its_factor_allows():
    batch = log_mel_batch(size=32)
    fast_or_slow = run(("speed",), batch, (1, 2))
    low, high = spectrogram.SPEED_RANGE
    centre = (FRAMES - 1) / 2
    for example in range(len(batch)):
        loud = np.flatnonzero(batch[example].max(axis=1) > -2)
        loud_after = np.flatnonzero(fast_or_slow[example].max(axis=1) > -2)
        length, length_after = loud[-1] - loud[0], loud_after[-1] - loud_after[0]
        assert length / high - 2 <= length_after <= length / low + 2
        assert abs((loud_after[0] - centre) - (loud[0] - centre) / high) <= abs(loud[0] - centre) * 0.4 + 2


def test_noise_lowers_the_snr_within_its_range_and_never_removes_power():
    batch = log_mel_batch(size=64)
    noisy = run(("noise",), batch, (5, 5))
    signal = np.exp(batch) - 1e-6
    added = (np.exp(noisy) - 1e-6) - signal
    assert (added > -1e-6 * np.abs(signal).max()).all()  # noise only adds power
    with_noise = added.mean(axis=(1, 2)) > 1e-9
    snr_db = 10 * np.log10(signal.mean(axis=(1, 2))[with_noise] / added.mean(axis=(1, 2))[with_noise])
    low, high = spectrogram.SNR_DB_RANGE
    assert low - 0.1 <= snr_db.min() and snr_db.max() <= high + 0.1
    share = with_noise.mean()
    assert 0.55 <= share <= 0.98  # applied with probability NOISE_PROBABILITY (0.8) per example


def test_gain_scales_power_within_its_bound():
    batch = log_mel_batch(size=32)
    louder = run(("gain",), batch, (2, 2))
    loud = batch > -2  # far above the floor, gain is a constant offset in the log domain
    offsets_db = 10 / np.log(10) * np.array([np.median((louder - batch)[example][loud[example]])
                                             for example in range(len(batch))])
    assert np.abs(offsets_db).max() <= spectrogram.GAIN_DB + 0.01
    assert np.ptp(offsets_db) > 3  # drawn per example


def test_mfcc_features_are_augmented_in_the_log_mel_domain_and_come_back_as_mfccs():
    log_mel = log_mel_batch()
    mfcc = tf.signal.mfccs_from_log_mel_spectrograms(tf.constant(log_mel)).numpy()
    np.testing.assert_allclose(spectrogram._mfcc_to_log_mel(tf.constant(mfcc)).numpy(), log_mel, atol=1e-4)
    expected = tf.signal.mfccs_from_log_mel_spectrograms(tf.constant(run(("shift",), log_mel, (4, 4)))).numpy()
    np.testing.assert_allclose(run(("shift",), mfcc, (4, 4), kind="mfcc"), expected, atol=1e-3)


def test_the_input_pipeline_augments_every_batch_afresh_and_a_resumed_stream_draws_the_same():
    from training.strategies.input_pipeline import training_dataset

    images = log_mel_batch(size=32).astype(np.float16)
    labels = np.arange(32, dtype=np.int32)
    augment = make_augmenter(("time_mask", "noise"))

    def batches(first_batch: int, count: int, augmenter=augment) -> list[np.ndarray]:
        stream = training_dataset(images, labels, 8, seed=0, augment=augmenter, augment_seed=(0, 1),
                                  first_batch=first_batch)
        return [x.numpy() for x, _ in stream.take(count)]

    plain = batches(0, 4, augmenter=None)
    augmented = batches(0, 4)
    again = batches(0, 4)
    for step in range(4):
        np.testing.assert_array_equal(augmented[step], again[step])
        assert not np.array_equal(augmented[step], plain[step])
    # The same examples in a later epoch (batch numbers 4.., same shuffle seed) get other draws.
    later = batches(4, 4)
    assert all(not np.array_equal(a, b) for a, b in zip(augmented, later, strict=True))
