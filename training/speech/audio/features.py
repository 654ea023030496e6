"""Keyword-spotting features from 1 s, 16 kHz clips: log-mel spectrograms and MFCCs, with tf.signal only.

25 ms periodic-Hann frames every 10 ms, a 512-point FFT and 40 triangular mel bands give a 98 × 40 map per clip
(frames × bands). MFCCs are the DCT-II of that log-mel map; all 40 coefficients are kept, so both kinds have the
same shape and one model serves either.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from training.speech.constants import FEATURE_KINDS, SAMPLE_RATE  # the kinds both environments know

CLIP_SAMPLES = SAMPLE_RATE  # one second
FRAME_LENGTH = 400  # 25 ms
FRAME_STEP = 160  # 10 ms
FFT_LENGTH = 512  # next power of two above FRAME_LENGTH: 257 bins, 31.25 Hz apart
MEL_BANDS = 40
LOWER_HZ = 20.0
# Below Nyquist (8 kHz) on purpose: recorders' anti-aliasing filters roll off over the last few hundred Hz, so a
# band reaching 8 kHz would mostly measure the filter, not the speaker.
UPPER_HZ = 7600.0
# All 40: the same 98 × 40 map as log-mel, so the model and its parameter count do not depend on the kind.
MFCC_COEFFICIENTS = MEL_BANDS
LOG_OFFSET = 1e-6  # keeps log() finite on digital silence
INT16_SCALE = 32768.0


def feature_shape(kind: str, clip_samples: int = CLIP_SAMPLES) -> tuple[int, int]:
    """(frames, bands) of the feature map of one clip: (98, 40) for a 1 s clip."""
    _check_kind(kind)
    if clip_samples < FRAME_LENGTH:
        raise ValueError(f"a clip needs at least {FRAME_LENGTH} samples (one frame), got {clip_samples}")
    frames = 1 + (clip_samples - FRAME_LENGTH) // FRAME_STEP
    return frames, MEL_BANDS if kind == "log_mel" else MFCC_COEFFICIENTS


def compute_features(clips: np.ndarray, kind: str = "log_mel", batch_size: int = 256) -> np.ndarray:
    """Feature maps (n, frames, bands) float32 for clips (n, 16000): int16 PCM, or floats in [-1, 1]."""
    _check_kind(kind)
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be an integer ≥ 1, got {batch_size}")
    waveforms = _as_float_waveforms(clips)
    transform = _log_mel if kind == "log_mel" else _mfcc
    frames, bands = feature_shape(kind)
    features = np.empty((len(waveforms), frames, bands), np.float32)
    # Fixed-size chunks bound memory on large shards; the [None, CLIP_SAMPLES] signature means one trace in all.
    for start in range(0, len(waveforms), batch_size):
        features[start : start + batch_size] = transform(waveforms[start : start + batch_size]).numpy()
    return features


def _check_kind(kind: str) -> None:
    if kind not in FEATURE_KINDS:
        raise ValueError(f"unknown feature kind {kind!r}; expected one of {FEATURE_KINDS}")


def _as_float_waveforms(clips: np.ndarray) -> np.ndarray:
    """float32 waveforms in [-1, 1]; int16 is scaled by 1/32768, which float32 represents exactly."""
    clips = np.asarray(clips)
    if clips.ndim != 2 or clips.shape[1] != CLIP_SAMPLES:
        raise ValueError(f"expected clips of shape (n, {CLIP_SAMPLES}) (1 s at {SAMPLE_RATE} Hz), got {clips.shape}")
    if clips.dtype == np.int16:
        return clips.astype(np.float32) / np.float32(INT16_SCALE)
    if not np.issubdtype(clips.dtype, np.floating):
        raise ValueError(f"expected int16 PCM or floating-point clips, got {clips.dtype} (convert to int16 first)")
    waveforms = clips.astype(np.float32)
    if waveforms.size and not np.all(np.isfinite(waveforms)):
        raise ValueError("floating-point clips contain NaN or infinity")
    peak = float(np.max(np.abs(waveforms), initial=0.0))
    if peak > 1.0:
        raise ValueError(f"floating-point clips must lie in [-1, 1], peak is {peak:g} (int16 values? divide by 32768)")
    return waveforms


@functools.lru_cache(maxsize=1)
def _mel_weights() -> np.ndarray:
    """(FFT bins, mel bands) triangular filter bank, computed once (eagerly, even when first asked while tracing)."""
    with tf.init_scope():
        return tf.signal.linear_to_mel_weight_matrix(
            num_mel_bins=MEL_BANDS,
            num_spectrogram_bins=FFT_LENGTH // 2 + 1,
            sample_rate=SAMPLE_RATE,
            lower_edge_hertz=LOWER_HZ,
            upper_edge_hertz=UPPER_HZ,
        ).numpy()


@tf.function(input_signature=[tf.TensorSpec([None, CLIP_SAMPLES], tf.float32)])
def _log_mel(waveforms: tf.Tensor) -> tf.Tensor:
    spectrogram = tf.signal.stft(
        waveforms,
        frame_length=FRAME_LENGTH,
        frame_step=FRAME_STEP,
        fft_length=FFT_LENGTH,
        window_fn=functools.partial(tf.signal.hann_window, periodic=True),
    )
    power = tf.math.square(tf.abs(spectrogram))
    mel_power = tf.tensordot(power, tf.constant(_mel_weights()), axes=1)
    return tf.math.log(mel_power + LOG_OFFSET)


@tf.function(input_signature=[tf.TensorSpec([None, CLIP_SAMPLES], tf.float32)])
def _mfcc(waveforms: tf.Tensor) -> tf.Tensor:
    return tf.signal.mfccs_from_log_mel_spectrograms(_log_mel(waveforms))[..., :MFCC_COEFFICIENTS]
