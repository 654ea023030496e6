"""Google Speech Commands (v0.01, v0.02): the layout, its split rule, safe extraction and the per-clip checks.

Layout: ``<word>/<speaker>_nohash_<n>.wav`` (1 s, 16 kHz, mono, 16-bit PCM), ``_background_noise_/*.wav`` (long
noise recordings), and ``validation_list.txt`` / ``testing_list.txt`` naming relative paths. Without the lists,
Speech Commands' own ``which_set`` rule assigns each speaker to a split by a sha1 hash of the speaker id, so all of
a speaker's clips land in the same split.
"""

from __future__ import annotations

import hashlib
import re
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SAMPLE_RATE = 16_000
BACKGROUND_NOISE = "_background_noise_"
SILENCE = "_silence_"
UNKNOWN = "_unknown_"
KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
# v0.02's 35 words; v0.01 has the first 30.
ALL_WORDS = ("bed", "bird", "cat", "dog", "down", "eight", "five", "four", "go", "happy", "house", "left", "marvin",
             "nine", "no", "off", "on", "one", "right", "seven", "sheila", "six", "stop", "three", "tree", "two", "up",
             "wow", "yes", "zero", "backward", "follow", "forward", "learn", "visual")
MAX_NUM_WAVS_PER_CLASS = 2**27 - 1  # from the dataset's README: fixes which_set's hash range


def speaker_of(path: str) -> str:
    """The speaker id of a clip: its file name up to ``_nohash_``."""
    return re.sub(r"_nohash_.*$", "", PurePosixPath(path).name)


def which_set(path: str, validation_percentage: float = 10.0, testing_percentage: float = 10.0) -> str:
    """'validation', 'testing' or 'training' for a clip, by Speech Commands' sha1 rule on its speaker id."""
    hashed = int(hashlib.sha1(speaker_of(path).encode()).hexdigest(), 16)
    percentage = (hashed % (MAX_NUM_WAVS_PER_CLASS + 1)) * (100.0 / MAX_NUM_WAVS_PER_CLASS)
    if percentage < validation_percentage:
        return "validation"
    if percentage < validation_percentage + testing_percentage:
        return "testing"
    return "training"


# --- Safe extraction -----------------------------------------------------------------------------------------


class UnsafeArchiveError(ValueError):
    """An archive member would write outside the target or is not a plain file or directory."""


def safe_extract(archive: Path, target: Path) -> list[str]:
    """Extract a .tar/.tar.gz into ``target`` after checking every member; returns the extracted file names.

    Rejected before anything is written: absolute paths, ``..`` components, links (symbolic or hard), devices
    and anything else that is not a regular file or a directory, and members resolving outside ``target``.
    """
    target = Path(target).resolve()
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            _check_member(member, target, archive)
        target.mkdir(parents=True, exist_ok=True)
        # The "data" filter repeats the same checks in the standard library (and drops modes and owners).
        tar.extractall(target, members=members, filter="data")
    return sorted(member.name for member in members if member.isfile())


def _check_member(member: tarfile.TarInfo, target: Path, archive: Path) -> None:
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path")
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out with '..'")
    if member.issym() or member.islnk():
        raise UnsafeArchiveError(f"{archive}: member {name!r} is a link (to {member.linkname!r})")
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"{archive}: member {name!r} is not a regular file or directory")
    if not (target / name).resolve().is_relative_to(target):
        raise UnsafeArchiveError(f"{archive}: member {name!r} resolves outside {target}")


# --- Clip checks ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WavFormat:
    """What a clip's RIFF header says."""

    channels: int
    sample_rate: int
    bits_per_sample: int
    audio_format: int  # 1 = PCM
    frames: int


class InvalidClipError(ValueError):
    """A clip is not 16-bit PCM WAV as Speech Commands stores it; the message is the reason for the ingest report."""


def inspect_wav(data: bytes) -> WavFormat:
    """Parse a WAV file's header and check it is whole; raises InvalidClipError with the reason."""
    if not data:
        raise InvalidClipError("empty file")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidClipError("not a WAV file (no RIFF/WAVE header)")
    position, fmt, frames = 12, None, None
    while position + 8 <= len(data):
        chunk_id, size = struct.unpack_from("<4sI", data, position)
        body = position + 8
        if chunk_id == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise InvalidClipError("truncated fmt chunk")
            audio_format, channels, sample_rate, _, block_align, bits = struct.unpack_from("<HHIIHH", data, body)
            fmt = (audio_format, channels, sample_rate, block_align, bits)
        elif chunk_id == b"data":
            if fmt is None:
                raise InvalidClipError("data chunk before the fmt chunk")
            if body + size > len(data):
                raise InvalidClipError(f"truncated: the data chunk declares {size} bytes, {len(data) - body} present")
            frames = size // max(1, fmt[3])
            break
        position = body + size + (size % 2)  # chunks are padded to an even length
    if fmt is None:
        raise InvalidClipError("truncated header: no fmt chunk")
    if frames is None:
        raise InvalidClipError("truncated: no data chunk")
    audio_format, channels, sample_rate, _, bits = fmt
    return WavFormat(channels=channels, sample_rate=sample_rate, bits_per_sample=bits, audio_format=audio_format,
                     frames=frames)


def check_clip(data: bytes, expected_rate: int = SAMPLE_RATE) -> WavFormat:
    """Inspect a clip and require mono 16-bit PCM at ``expected_rate`` with at least one sample."""
    wav = inspect_wav(data)
    if wav.audio_format != 1 or wav.bits_per_sample != 16:
        raise InvalidClipError(f"not 16-bit PCM (format {wav.audio_format}, {wav.bits_per_sample} bits)")
    if wav.channels != 1:
        raise InvalidClipError(f"{wav.channels} channels, expected mono")
    if wav.frames == 0:
        raise InvalidClipError("zero-length audio")
    if wav.sample_rate != expected_rate:
        raise InvalidClipError(f"sample rate {wav.sample_rate} Hz, expected {expected_rate} Hz")
    return wav
