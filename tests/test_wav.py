"""The one WAV reader: every sample of a whole 16-bit mono PCM file, and a precise reason for everything else."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from wav_files import EXTENSIBLE, IEEE_FLOAT, chunk, fmt_chunk, riff, wav_bytes

from training.speech.audio.wav import InvalidWavError, read_mono_pcm16

RAMP = (np.arange(16_000) % 2000 - 1000).astype("<i2")  # no two neighbouring samples alike, no zeros in a row
DATA = RAMP.tobytes()


def assert_every_sample(data: bytes, rate: int = 16_000) -> None:
    clip = read_mono_pcm16(data)
    assert clip.sample_rate == rate and clip.samples.dtype == np.int16
    np.testing.assert_array_equal(clip.samples, RAMP)


def test_a_plain_file_is_read_whole():
    assert_every_sample(wav_bytes(RAMP))
    assert read_mono_pcm16(wav_bytes(RAMP)).frames == 16_000


@pytest.mark.parametrize("riff_size", [4, 36, 1000, 0xFFFF_FFFF], ids=["tiny", "header-only", "mid-data", "huge"])
def test_the_data_chunk_is_read_by_its_own_size_whatever_the_riff_size_field_says(riff_size):
    assert_every_sample(riff(fmt_chunk(), chunk(b"data", DATA), riff_size=riff_size))


def test_a_list_chunk_before_fmt_and_odd_sized_chunks_with_their_pad_byte_are_read():
    assert_every_sample(riff(chunk(b"LIST", b"INFOISFT\x03\x00\x00\x00ab\x00"), fmt_chunk(), chunk(b"data", DATA)))
    assert_every_sample(riff(fmt_chunk(), chunk(b"odd ", b"abc"), chunk(b"data", DATA), chunk(b"LIST", b"x")))


def test_an_odd_sized_data_chunk_gives_its_whole_frames():
    assert_every_sample(riff(fmt_chunk(), chunk(b"data", DATA + b"\x07")))


def test_streamed_sizes_are_read_to_the_end_of_the_file_only_when_asked():
    streamed = riff(fmt_chunk(), chunk(b"data", DATA, declared_size=0x7FFF_F000), riff_size=0x7FFF_F024)
    with pytest.raises(InvalidWavError, match="truncated: the data chunk declares 2147479552 bytes, 32000 present"):
        read_mono_pcm16(streamed)
    np.testing.assert_array_equal(read_mono_pcm16(streamed, open_ended=True).samples, RAMP)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="from Python 3.12, wave reads WAVE_FORMAT_EXTENSIBLE PCM")
def test_wave_format_extensible_is_skipped_with_what_to_do():
    with pytest.raises(InvalidWavError, match="WAVE_FORMAT_EXTENSIBLE .* save it as plain 16-bit PCM"):
        read_mono_pcm16(riff(fmt_chunk(format_tag=EXTENSIBLE), chunk(b"data", DATA)))


BAD = {
    "empty": (b"", "^empty file$"),
    "text": (b"just some text, no audio", r"^not a WAV file \(no RIFF/WAVE header\)$"),
    "header cut in fmt": (wav_bytes(RAMP)[:30], "^truncated header$"),
    "header cut after fmt": (wav_bytes(RAMP)[:40], "^truncated or malformed: no fmt chunk or no data chunk$"),
    "no data chunk": (riff(fmt_chunk()), "no data chunk"),
    "data cut": (wav_bytes(RAMP)[:2000], "^truncated: the data chunk declares 32000 bytes, 1956 present$"),
    "data larger than the file": (riff(fmt_chunk(), chunk(b"data", DATA, declared_size=40_000)),
                                  "^truncated: the data chunk declares 40000 bytes, 32000 present$"),
    "data before fmt": (riff(chunk(b"data", DATA), fmt_chunk()), "^data chunk before the fmt chunk$"),
    "chunk past the end": (riff(chunk(b"LIST", b"INFO", declared_size=10**9), fmt_chunk(), chunk(b"data", DATA)),
                           "^malformed: a chunk before the data runs past the end of the file$"),
    "8-bit": (wav_bytes(np.full(8000, 128, np.uint8), width=1), r"^not 16-bit PCM \(8-bit samples\)$"),
    "24-bit": (riff(fmt_chunk(bits=24), chunk(b"data", DATA[:-2])), r"^not 16-bit PCM \(24-bit samples\)$"),
    "float": (riff(fmt_chunk(format_tag=IEEE_FLOAT, bits=32), chunk(b"data", DATA)),
              r"^not 16-bit PCM \(format tag 3, IEEE float\)$"),
    "stereo": (wav_bytes(np.repeat(RAMP, 2), channels=2), "^2 channels, expected mono$"),
    "no channels": (riff(fmt_chunk(channels=0), chunk(b"data", DATA)), "^0 channels, expected mono$"),
    "zero-length": (wav_bytes(np.zeros(0, np.int16)), "^zero-length audio$"),
    "half a frame": (riff(fmt_chunk(), chunk(b"data", b"\x01")), "^zero-length audio$"),
    "rate 0": (riff(fmt_chunk(rate=0), chunk(b"data", DATA)), "^sample rate 0 Hz$"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_each_bad_file_gets_its_reason(case):
    data, reason = BAD[case]
    with pytest.raises(InvalidWavError, match=reason):
        read_mono_pcm16(data)
