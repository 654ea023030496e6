"""WAV bytes for tests: well-formed ones written by the standard library, and hand-assembled RIFF chunks for the
malformed and unusual ones a reader must judge (wrong size fields, odd-sized and unknown chunks, other formats)."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np

PCM = 1
IEEE_FLOAT = 3
EXTENSIBLE = 0xFFFE
KSDATAFORMAT_SUBTYPE_PCM = bytes.fromhex("0100000000001000800000aa00389b71")


def wav_bytes(samples: np.ndarray, rate: int = 16_000, channels: int = 1, width: int = 2) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(width)
        writer.setframerate(rate)
        writer.writeframes(samples.tobytes())
    return buffer.getvalue()


def chunk(chunk_id: bytes, body: bytes, declared_size: int | None = None, pad: bool = True) -> bytes:
    """One RIFF chunk; ``declared_size`` may lie about the body; odd bodies get their pad byte unless ``pad``."""
    size = len(body) if declared_size is None else declared_size
    return chunk_id + struct.pack("<I", size) + body + (b"\0" if pad and len(body) % 2 else b"")


def fmt_chunk(rate: int = 16_000, channels: int = 1, bits: int = 16, format_tag: int = PCM,
              sub_format: bytes = KSDATAFORMAT_SUBTYPE_PCM) -> bytes:
    block_align = channels * ((bits + 7) // 8)
    body = struct.pack("<HHIIHH", format_tag, channels, rate, rate * block_align, block_align, bits)
    if format_tag == EXTENSIBLE:
        body += struct.pack("<HHI", 22, bits, 0x4 if channels == 1 else 0x3) + sub_format
    return chunk(b"fmt ", body)


def riff(*chunks: bytes, riff_size: int | None = None) -> bytes:
    """A RIFF/WAVE file of the given chunks; ``riff_size`` overrides the size field (normally the length - 8)."""
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body) if riff_size is None else riff_size) + body
