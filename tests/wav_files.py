"""WAV bytes for tests: any rate, channel count and sample width, written by the standard library."""

from __future__ import annotations

import io
import wave

import numpy as np


def wav_bytes(samples: np.ndarray, rate: int = 16_000, channels: int = 1, width: int = 2) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(width)
        writer.setframerate(rate)
        writer.writeframes(samples.tobytes())
    return buffer.getvalue()
