"""Online augmentation of keyword-spotting features: fresh for every batch, in the tf.data input pipeline.

The offline copies (``augment_copies``, :mod:`training.speech.features_job`) perturb waveforms once, before training;
these perturb the stored log-mel maps (98 frames × 40 bands) every step, so no two epochs see the same example.
Everything happens in the feature domain, because shards hold features, not waveforms:

- ``speed``: time axis stretched by 0.85–1.15 (linear interpolation between frames), like resampling the clip;
- ``pitch``: mel axis warped by 0.9–1.1 (a vocal-tract-length warp: formants move up or down);
- ``shift``: up to ±15 frames (±150 ms) of time shift; frames shifted in are silence (the example's floor);
- ``gain``: ±12 dB on the power spectrum; the model normalises every example, so gain only changes how much of
  the clip sinks under the log floor (and is measured as such, not assumed useful);
- ``noise``: with probability 0.8, coloured noise (white to brown, frame-to-frame fluctuation) added in the power
  domain at an SNR of 0–30 dB against the example's mean power;
- ``time_mask`` / ``freq_mask``: SpecAugment (Park et al. 2019): two masks of up to 12 frames / 6 bands set to the
  example's mean (zero after the model's per-example normalisation).

MFCC features are turned back into log-mel (all 40 coefficients are kept, so the DCT inverts exactly), augmented
and turned into MFCCs again. Every draw is a stateless function of a seed pair, so a batch's augmentation depends
only on (seed, worker, step): the same run gives the same augmented stream, and every epoch gets new draws.
"""

from __future__ import annotations

from typing import Any

ONLINE_AUGMENTATIONS = ("speed", "pitch", "shift", "gain", "noise", "time_mask", "freq_mask")

SPEED_RANGE = (0.85, 1.15)
PITCH_RANGE = (0.9, 1.1)
MAX_SHIFT_FRAMES = 15
GAIN_DB = 12.0
NOISE_PROBABILITY = 0.8
SNR_DB_RANGE = (0.0, 30.0)
NOISE_FLUCTUATION = 0.35  # log-normal sigma of the noise power from frame to frame and band to band
TIME_MASKS, MAX_TIME_MASK_FRAMES = 2, 12
FREQ_MASKS, MAX_FREQ_MASK_BANDS = 2, 6
LOG_OFFSET = 1e-6  # training.speech.audio.features.LOG_OFFSET: the floor log() was taken over


def parse_augmentations(names: str) -> tuple[str, ...]:
    """'speed,noise' → ('speed', 'noise') in the order they are applied; '' or 'none' → (); unknown names refused."""
    chosen = {name.strip() for name in names.split(",") if name.strip() and name.strip() != "none"}
    unknown = sorted(chosen - set(ONLINE_AUGMENTATIONS))
    if unknown:
        raise ValueError(f"unknown online augmentation {', '.join(unknown)}; choose from "
                         f"{', '.join(ONLINE_AUGMENTATIONS)} (or none)")
    return tuple(name for name in ONLINE_AUGMENTATIONS if name in chosen)


def make_augmenter(names: tuple[str, ...], kind: str = "log_mel") -> Any:
    """A function (features batch (b, frames, bands) float32, seed int64[2]) → augmented batch, or None if nothing
    is chosen. ``kind`` is the stored feature kind: 'log_mel' or 'mfcc'."""
    if not names:
        return None
    if kind not in ("log_mel", "mfcc"):
        raise ValueError(f"online augmentation works on log_mel or mfcc features, not {kind!r}")
    import tensorflow as tf

    def augment(features: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=len(ONLINE_AUGMENTATIONS))
        log_mel = _mfcc_to_log_mel(features) if kind == "mfcc" else features
        for index, name in enumerate(ONLINE_AUGMENTATIONS):
            if name in names:
                log_mel = _APPLY[name](log_mel, seeds[index])
        return tf.signal.mfccs_from_log_mel_spectrograms(log_mel) if kind == "mfcc" else log_mel

    return augment


def _mfcc_to_log_mel(mfcc: Any) -> Any:
    """The exact inverse of tf.signal.mfccs_from_log_mel_spectrograms with every coefficient kept: that is the
    unnormalised DCT-II times 1/sqrt(2N), and DCT-III(DCT-II(x)) = 2N·x."""
    import tensorflow as tf

    bands = tf.cast(tf.shape(mfcc)[-1], mfcc.dtype)
    return tf.signal.idct(mfcc * tf.sqrt(2.0 * bands), type=2) / (2.0 * bands)


def _uniform(seed: Any, shape: Any, low: float, high: float) -> Any:
    import tensorflow as tf

    return tf.random.stateless_uniform(shape, seed=seed, minval=low, maxval=high)


def _floor(log_mel: Any) -> Any:
    """Each example's quietest value: what frames or bands moved in from outside the map are filled with."""
    import tensorflow as tf

    return tf.reduce_min(log_mel, axis=[1, 2])


def _resample_time(log_mel: Any, source: Any) -> Any:
    """Output frame t reads input frame ``source[b, t]`` (fractional: linear interpolation); outside the map, the
    example's floor."""
    import tensorflow as tf

    frames = tf.shape(log_mel)[1]
    last = tf.cast(frames - 1, tf.float32)
    lower = tf.floor(source)
    weight = (source - lower)[..., None]
    lower_index = tf.cast(tf.clip_by_value(lower, 0.0, last), tf.int32)
    upper_index = tf.cast(tf.clip_by_value(lower + 1.0, 0.0, last), tf.int32)
    values = (tf.gather(log_mel, lower_index, batch_dims=1) * (1.0 - weight)
              + tf.gather(log_mel, upper_index, batch_dims=1) * weight)
    inside = (source >= 0.0) & (source <= last)
    return tf.where(inside[..., None], values, _floor(log_mel)[:, None, None])


def _time_grid(log_mel: Any) -> Any:
    import tensorflow as tf

    batch, frames = tf.shape(log_mel)[0], tf.shape(log_mel)[1]
    return tf.broadcast_to(tf.range(frames, dtype=tf.float32)[None, :], [batch, frames])


def _speed(log_mel: Any, seed: Any) -> Any:
    """Faster speech (factor > 1) ends sooner: frame t reads t·factor, around the map's centre."""
    import tensorflow as tf

    factor = _uniform(seed, [tf.shape(log_mel)[0]], *SPEED_RANGE)[:, None]
    centre = tf.cast(tf.shape(log_mel)[1] - 1, tf.float32) / 2.0
    return _resample_time(log_mel, centre + (_time_grid(log_mel) - centre) * factor)


def _pitch(log_mel: Any, seed: Any) -> Any:
    """Band f reads band f·factor: the spectral envelope moves up or down the mel axis."""
    import tensorflow as tf

    factor = _uniform(seed, [tf.shape(log_mel)[0]], *PITCH_RANGE)[:, None]
    bands_first = tf.transpose(log_mel, [0, 2, 1])
    warped = _resample_time(bands_first, _time_grid(bands_first) * factor)
    return tf.transpose(warped, [0, 2, 1])


def _shift(log_mel: Any, seed: Any) -> Any:
    import tensorflow as tf

    frames = tf.round(_uniform(seed, [tf.shape(log_mel)[0]], -MAX_SHIFT_FRAMES - 0.5, MAX_SHIFT_FRAMES + 0.5))
    return _resample_time(log_mel, _time_grid(log_mel) - tf.clip_by_value(frames, -MAX_SHIFT_FRAMES,
                                                                           MAX_SHIFT_FRAMES)[:, None])


def _power(log_mel: Any) -> Any:
    import tensorflow as tf

    return tf.maximum(tf.exp(log_mel) - LOG_OFFSET, 0.0)


def _gain(log_mel: Any, seed: Any) -> Any:
    import tensorflow as tf

    decibels = _uniform(seed, [tf.shape(log_mel)[0]], -GAIN_DB, GAIN_DB)
    return tf.math.log(_power(log_mel) * tf.pow(10.0, decibels / 10.0)[:, None, None] + LOG_OFFSET)


def _noise(log_mel: Any, seed: Any) -> Any:
    """Noise of a random colour (power ∝ band^-tilt, tilt 0–2: white to brown) that fluctuates log-normally,
    scaled so that mean signal power / mean noise power is the drawn SNR."""
    import tensorflow as tf

    batch, frames, bands = tf.shape(log_mel)[0], tf.shape(log_mel)[1], tf.shape(log_mel)[2]
    draws = tf.random.experimental.stateless_split(seed, num=4)
    power = _power(log_mel)
    snr_db = _uniform(draws[0], [batch], *SNR_DB_RANGE)
    tilt = _uniform(draws[1], [batch, 1, 1], 0.0, 2.0)
    band = tf.cast(tf.range(1, bands + 1), tf.float32)[None, None, :]
    colour = tf.pow(band, -tilt)
    colour /= tf.reduce_mean(colour, axis=2, keepdims=True)
    fluctuation = tf.exp(NOISE_FLUCTUATION * tf.random.stateless_normal([batch, frames, bands], seed=draws[2]))
    noise = colour * fluctuation
    noise /= tf.reduce_mean(noise, axis=[1, 2], keepdims=True)
    level = tf.reduce_mean(power, axis=[1, 2]) / tf.pow(10.0, snr_db / 10.0)
    applied = tf.cast(_uniform(draws[3], [batch], 0.0, 1.0) < NOISE_PROBABILITY, tf.float32)
    return tf.math.log(power + (applied * level)[:, None, None] * noise + LOG_OFFSET)


def _mask_along(log_mel: Any, seed: Any, axis: int, count: int, widest: int) -> Any:
    """``count`` masks of width 0..widest along ``axis`` (1: frames, 2: bands), set to the example's mean."""
    import tensorflow as tf

    batch, length = tf.shape(log_mel)[0], tf.shape(log_mel)[axis]
    draws = tf.random.experimental.stateless_split(seed, num=2)
    widths = tf.floor(_uniform(draws[0], [batch, count], 0.0, widest + 1.0))
    starts = tf.floor(_uniform(draws[1], [batch, count], 0.0, 1.0) * (tf.cast(length, tf.float32) - widths + 1.0))
    position = tf.cast(tf.range(length), tf.float32)[None, None, :]
    masked = tf.reduce_any((position >= starts[..., None]) & (position < (starts + widths)[..., None]), axis=1)
    masked = masked[:, :, None] if axis == 1 else masked[:, None, :]
    return tf.where(masked, tf.reduce_mean(log_mel, axis=[1, 2])[:, None, None], log_mel)


def _time_mask(log_mel: Any, seed: Any) -> Any:
    return _mask_along(log_mel, seed, 1, TIME_MASKS, MAX_TIME_MASK_FRAMES)


def _freq_mask(log_mel: Any, seed: Any) -> Any:
    return _mask_along(log_mel, seed, 2, FREQ_MASKS, MAX_FREQ_MASK_BANDS)


_APPLY = {"speed": _speed, "pitch": _pitch, "shift": _shift, "gain": _gain, "noise": _noise,
          "time_mask": _time_mask, "freq_mask": _freq_mask}
