"""WAV bytes → 16-bit mono PCM samples, read by the standard library's ``wave`` and checked strictly.

``wave`` alone is lenient where a dataset must not be: it cuts the data chunk at a RIFF size field that is too
small, returns fewer frames than a truncated data chunk declares, and reads 8-bit and multi-channel audio as
happily as 16-bit mono. ``read_mono_pcm16`` closes each gap and says what is wrong in an ``InvalidWavError``.
"""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

import numpy as np

WAVE_FORMAT_EXTENSIBLE = 0xFFFE
FORMAT_NAMES = {2: "ADPCM", 3: "IEEE float", 6: "A-law", 7: "µ-law", 17: "IMA ADPCM", 85: "MP3"}
SAMPLE_BYTES = 2  # 16-bit


class InvalidWavError(ValueError):
    """The bytes are not a whole 16-bit mono PCM WAV; the message is the reason, fit for a report."""


@dataclass(frozen=True)
class Pcm16:
    """A clip's sample rate and its samples (int16, one channel)."""

    sample_rate: int
    samples: np.ndarray

    @property
    def frames(self) -> int:
        return len(self.samples)


def read_mono_pcm16(data: bytes, open_ended: bool = False) -> Pcm16:
    """Every sample of a 16-bit mono PCM WAV; raises InvalidWavError naming what is wrong.

    The data chunk is read by its own size: the RIFF size field is not trusted (writers that stream or crash leave
    it wrong). A data chunk declaring more bytes than the file holds is truncated, unless ``open_ended`` (streaming
    writers such as espeak-ng declare a placeholder size; then the whole frames present are read).
    """
    if not data:
        raise InvalidWavError("empty file")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidWavError("not a WAV file (no RIFF/WAVE header)")
    riff_sized_to_the_file = data[:4] + struct.pack("<I", min(len(data) - 8, 0xFFFF_FFFF)) + data[8:]
    try:
        with wave.open(io.BytesIO(riff_sized_to_the_file)) as reader:
            sample_width, channels, declared = reader.getsampwidth(), reader.getnchannels(), reader.getnframes()
            if sample_width != SAMPLE_BYTES:
                raise InvalidWavError(f"not 16-bit PCM ({8 * sample_width}-bit samples)")
            if channels != 1:
                raise InvalidWavError(f"{channels} channels, expected mono")
            if declared == 0:
                raise InvalidWavError("zero-length audio")
            frames = reader.readframes(declared)
            sample_rate = reader.getframerate()
    except wave.Error as error:
        raise InvalidWavError(_reason_of(error)) from error
    except EOFError as error:  # wave's word for a header cut short
        raise InvalidWavError("truncated header") from error
    except RuntimeError as error:  # wave's chunk reader, asked to skip past the end of the file
        raise InvalidWavError("malformed: a chunk before the data runs past the end of the file") from error
    present = len(frames) - len(frames) % SAMPLE_BYTES
    if present < declared * SAMPLE_BYTES and not open_ended:
        raise InvalidWavError(f"truncated: the data chunk declares {declared * SAMPLE_BYTES} bytes, "
                              f"{len(frames)} present")
    if present == 0:
        raise InvalidWavError("zero-length audio")
    if sample_rate <= 0:
        raise InvalidWavError(f"sample rate {sample_rate} Hz")
    return Pcm16(sample_rate, np.frombuffer(frames[:present], dtype="<i2").astype(np.int16))


def _reason_of(error: wave.Error) -> str:
    """A report reason for what ``wave`` refused (its messages are terse and name no fix)."""
    message = str(error)
    if message == f"unknown format: {WAVE_FORMAT_EXTENSIBLE}":
        # Python 3.11's wave reads only the plain PCM tag (3.12's also reads this one); Speech Commands has none.
        return "WAVE_FORMAT_EXTENSIBLE header, which this reader does not take: save it as plain 16-bit PCM"
    if message.startswith("unknown format: "):
        tag = message.removeprefix("unknown format: ")
        named = f", {FORMAT_NAMES[int(tag)]}" if tag.isdigit() and int(tag) in FORMAT_NAMES else ""
        return f"not 16-bit PCM (format tag {tag}{named})"
    if message.startswith("unknown extended format"):
        return f"not 16-bit PCM ({message})"
    if message == "bad sample width":
        return "not 16-bit PCM (0-bit samples)"
    if message == "bad # of channels":
        return "0 channels, expected mono"
    if message == "data chunk before fmt chunk":
        return "data chunk before the fmt chunk"
    if message == "fmt chunk and/or data chunk missing":
        return "truncated or malformed: no fmt chunk or no data chunk"
    return f"malformed WAV ({message})"
