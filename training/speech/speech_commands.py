"""Google Speech Commands (v0.01, v0.02): the layout, its split rule, safe extraction and the per-clip checks.

Layout: ``<word>/<speaker>_nohash_<n>.wav`` (1 s, 16 kHz, mono, 16-bit PCM), ``_background_noise_/*.wav`` (long
noise recordings), and ``validation_list.txt`` / ``testing_list.txt`` naming relative paths. Without the lists,
Speech Commands' own ``which_set`` rule assigns each speaker to a split by a sha1 hash of the speaker id, so all of
a speaker's clips land in the same split.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import re
import shutil
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from training import storage
from training.datasets import download
from training.speech.audio import wav
from training.speech.constants import SAMPLE_RATE

BACKGROUND_NOISE = "_background_noise_"
SILENCE = "_silence_"
UNKNOWN = "_unknown_"
KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
# v0.02's 35 words; v0.01 has the first 30.
ALL_WORDS = ("bed", "bird", "cat", "dog", "down", "eight", "five", "four", "go", "happy", "house", "left", "marvin",
             "nine", "no", "off", "on", "one", "right", "seven", "sheila", "six", "stop", "three", "tree", "two", "up",
             "wow", "yes", "zero", "backward", "follow", "forward", "learn", "visual")
# Non-keyword words a keyword spotter never trains on (not even as _unknown_): the test speakers' clips of them
# measure open-set false accepts, as a deployed spotter meets words it never heard. Each sounds near a keyword
# (dog: go, down; four: off, on; learn: left; wow: up, no) or is a common word (tree); "learn" is v0.02's only.
OPEN_SET_WORDS = ("dog", "four", "learn", "tree", "wow")
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


# --- File names ----------------------------------------------------------------------------------------------


def is_utf8(name: str) -> bool:
    """Whether a name read from disk or a tar header was valid UTF-8 (undecodable bytes arrive as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(name: str) -> str:
    """A name fit for a report or a one-line message: undecodable bytes as ``\\xNN``, control characters escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in text)


# --- Safe extraction -----------------------------------------------------------------------------------------

# Speech Commands v0.02 holds 105,829 one-second clips (~32 KB each), six background recordings of up to ~6 MB
# and four text files: ~3.3 GB extracted from a 2.4 GB .tar.gz. The defaults leave a wide margin above that.
MAX_MEMBER_BYTES = 64 * 2**20
MAX_EXTRACTED_BYTES = 8 * 2**30
MAX_ARCHIVE_MEMBERS = 250_000
READ_BYTES = 2**20  # one read of member data; tarfile reads a header extension whole, so this also bounds those
# Speech Commands nests three deep (wrapper/word/clip); much deeper trees would overflow the recursion of
# shutil.rmtree when the temporary directory is removed.
MAX_MEMBER_DEPTH = 32
MAX_TRAILING_BYTES = 16 * 2**20  # after the end-of-archive marker: zero padding to the tar record size, normally
END_OF_ARCHIVE = bytes(tarfile.BLOCKSIZE)


class ArchiveError(storage.DatasetError):
    """An archive cannot be extracted: corrupt or truncated, over a size limit, or a member cannot be written."""


class UnsafeArchiveError(ArchiveError):
    """An archive member would write outside the target, is not a plain file or directory, or collides with another."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What an archive may extract to: checked from the tar headers before writing, and enforced while writing."""

    member_bytes: int = MAX_MEMBER_BYTES
    total_bytes: int = MAX_EXTRACTED_BYTES
    members: int = MAX_ARCHIVE_MEMBERS

    def __post_init__(self) -> None:
        for name, value in (("max_member_bytes", self.member_bytes), ("max_extracted_bytes", self.total_bytes),
                            ("max_archive_members", self.members)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1, got {value}")


@dataclass
class Extraction:
    """What an archive yielded: the files written (relative names) and members skipped, with reasons."""

    files: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)


def safe_extract(archive: Path, target: Path, limits: ArchiveLimits | None = None, name: str = "") -> Extraction:
    """Extract a .tar, .tar.gz, .tar.bz2 or .tar.xz into ``target``, which must not exist yet.

    A first pass checks every member and reads the compressed stream to its end (so its checksum is verified);
    only then is anything written, by a second pass that checks everything again. Refused: an archive that is not
    a regular file (a FIFO, a device); members with absolute paths, ``..``, links, devices and other non-regular
    members, names colliding with each other or too long for the filesystem, members nested more than
    MAX_MEMBER_DEPTH deep, anything over ``limits``. Members whose names are not UTF-8 are skipped and listed.
    Every refusal is an ArchiveError naming the archive (``name`` if given); after one, ``target`` does not exist.
    """
    limits = limits or ArchiveLimits()
    label = name or str(archive)
    target = Path(target).absolute()
    if target.exists():
        raise ValueError(f"{target}: the extraction target must not exist yet")
    _read_archive(Path(archive), label, target, limits, write=False)
    try:
        target.mkdir(parents=True)
        return _read_archive(Path(archive), label, target, limits, write=True)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def _read_archive(archive: Path, label: str, target: Path, limits: ArchiveLimits, write: bool) -> Extraction:
    checks = _MemberChecks(label, target, limits)
    writer = _Writer(label, target, limits)
    try:
        with _tar_stream(archive, label) as (tar, stream):
            while (member := tar.next()) is not None:
                parts = checks.admit(member)
                if parts is not None and write:
                    writer.write(tar, member, parts)
            _read_to_the_end(stream, label)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ArchiveError(f"{label}: not a readable .tar/.tar.gz archive ({reason}); is the file complete?") from error
    return Extraction(files=sorted(writer.files), skipped=checks.skipped)


@contextmanager
def _tar_stream(archive: Path, label: str) -> Iterator[tuple[tarfile.TarFile, _BoundedStream]]:
    """The archive's tar stream, decompressed by the format its first bytes name; a FIFO or a device is refused."""
    try:
        opened = download.open_local_file(archive, label)
    except storage.DatasetError as error:
        raise ArchiveError(str(error)) from None
    with opened as raw:
        magic = raw.read(6)
        raw.seek(0)
        if magic.startswith(b"\x1f\x8b"):
            decompressed = gzip.GzipFile(fileobj=raw, mode="rb")
        elif magic.startswith(b"BZh"):
            decompressed = bz2.BZ2File(raw, mode="rb")
        elif magic == b"\xfd7zXZ\x00":
            decompressed = lzma.LZMAFile(raw, mode="rb")
        else:
            decompressed = raw
        with decompressed:
            stream = _BoundedStream(decompressed, label)
            with tarfile.open(fileobj=stream, mode="r:", encoding="utf-8", errors="surrogateescape") as tar:
                yield tar, stream


class _BoundedStream:
    """The tar stream as tarfile sees it: no single read over READ_BYTES, and the last block read is kept."""

    def __init__(self, stream, label: str) -> None:
        self.stream, self.label, self.last_read = stream, label, b""

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > READ_BYTES:  # tarfile reading a pax or long-name header whole
            raise ArchiveError(f"{self.label}: a tar header extension of {size} bytes (more than {READ_BYTES}): "
                               f"not a Speech Commands archive")
        self.last_read = self.stream.read(size)
        return self.last_read

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()


def _read_to_the_end(stream: _BoundedStream, label: str) -> None:
    """Require the end-of-archive marker, then read the rest: a compressed stream's checksum is checked at its end."""
    if stream.last_read != END_OF_ARCHIVE:
        raise ArchiveError(f"{label}: the archive ends without its end-of-archive marker (truncated or corrupt)")
    trailing = 0
    while block := stream.read(READ_BYTES):
        trailing += len(block)
        if trailing > MAX_TRAILING_BYTES:
            raise ArchiveError(f"{label}: more than {MAX_TRAILING_BYTES} bytes after the end-of-archive marker")


class _MemberChecks:
    """Every member's checks, in archive order: safety, limits (from the headers), names, collisions."""

    def __init__(self, label: str, target: Path, limits: ArchiveLimits) -> None:
        self.label, self.target, self.limits = label, target, limits
        self.resolved_target = target.resolve()
        self.members = self.declared_bytes = 0
        self.kinds: dict[tuple[str, ...], str] = {}  # path parts → "file" or "directory"
        self.skipped: list[dict[str, str]] = []
        self.name_max, self.path_max = _name_limits(target)

    def admit(self, member: tarfile.TarInfo) -> tuple[str, ...] | None:
        """The member's path parts if it is to be written; None if skipped or it is the root. Raises if unsafe."""
        shown = _short(printable(member.name))
        parts = self._safe_parts(member, shown)
        self._count(member, shown)
        if not is_utf8(member.name):
            if member.isfile():
                self.skipped.append({"path": printable(member.name), "reason": "file name is not valid UTF-8"})
            return None
        if not parts:
            if member.isdir():
                return None
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' is a file in place of the archive's root")
        self._check_name(parts, shown)
        self._check_collisions(parts, member.isdir(), shown)
        return parts

    def _safe_parts(self, member: tarfile.TarInfo, shown: str) -> tuple[str, ...]:
        name = member.name
        if "\x00" in name:
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' has a NUL byte in its name")
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' has an absolute path")
        parts = PurePosixPath(name).parts
        if ".." in parts:
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' climbs out with '..'")
        if member.issym() or member.islnk():
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' is a link (to '{printable(member.linkname)}')")
        if not (member.isfile() or member.isdir()) or member.issparse():
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' is not a regular file or directory")
        if not self.target.joinpath(*parts).resolve().is_relative_to(self.resolved_target):
            raise UnsafeArchiveError(f"{self.label}: member '{shown}' resolves outside {self.target}")
        return parts

    def _count(self, member: tarfile.TarInfo, shown: str) -> None:
        self.members += 1
        if self.members > self.limits.members:
            raise ArchiveError(f"{self.label}: more than {self.limits.members} members (max_archive_members): "
                               f"not a Speech Commands archive, or raise the limit")
        if member.size < 0:
            raise ArchiveError(f"{self.label}: member '{shown}' declares a negative size ({member.size} bytes)")
        if member.size > self.limits.member_bytes:
            raise ArchiveError(f"{self.label}: member '{shown}' is {member.size} bytes, more than the "
                               f"{self.limits.member_bytes} allowed per member (max_member_bytes)")
        self.declared_bytes += member.size
        if self.declared_bytes > self.limits.total_bytes:
            raise ArchiveError(f"{self.label}: extracts to more than {self.limits.total_bytes} bytes "
                               f"(max_extracted_bytes), at member '{shown}'")

    def _check_name(self, parts: tuple[str, ...], shown: str) -> None:
        if len(parts) > MAX_MEMBER_DEPTH:
            raise ArchiveError(f"{self.label}: member '{shown}' is nested {len(parts)} levels deep, more than "
                               f"{MAX_MEMBER_DEPTH}: not a Speech Commands archive")
        longest = max(len(os.fsencode(part)) for part in parts)
        if longest > self.name_max:
            raise ArchiveError(f"{self.label}: member '{shown}' has a name of {longest} bytes; this filesystem "
                               f"allows {self.name_max}")
        if len(os.fsencode(self.target.joinpath(*parts))) >= self.path_max:
            raise ArchiveError(f"{self.label}: member '{shown}' would have a path longer than this filesystem "
                               f"allows ({self.path_max} bytes)")

    def _check_collisions(self, parts: tuple[str, ...], is_directory: bool, shown: str) -> None:
        for depth in range(1, len(parts)):
            if self.kinds.setdefault(parts[:depth], "directory") == "file":
                raise UnsafeArchiveError(f"{self.label}: member '{shown}' lies below the regular file "
                                         f"'{printable('/'.join(parts[:depth]))}'")
        earlier = self.kinds.get(parts)
        if is_directory and earlier == "file":
            raise UnsafeArchiveError(f"{self.label}: directory '{shown}' has the name of an earlier file")
        if not is_directory and earlier == "directory":
            raise UnsafeArchiveError(f"{self.label}: file '{shown}' has the name of a directory")
        if not is_directory and earlier == "file":
            raise UnsafeArchiveError(f"{self.label}: file '{shown}' appears twice")
        self.kinds[parts] = "directory" if is_directory else "file"


def _name_limits(target: Path) -> tuple[int, int]:
    """(longest file name, longest path) in bytes on the filesystem ``target`` will be on."""
    existing = next(parent for parent in (target, *target.parents) if parent.exists())
    try:
        return os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows) or the filesystem does not say
        return 255, 4096


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else f"{name[: limit - 20]}…{name[-19:]} ({len(name)} characters)"


class _Writer:
    """Writes admitted members below the target, counting the bytes actually written against the limits."""

    def __init__(self, label: str, target: Path, limits: ArchiveLimits) -> None:
        self.label, self.target, self.limits = label, target, limits
        self.directories: set[tuple[str, ...]] = {()}
        self.files: list[str] = []
        self.written_bytes = 0

    def write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, parts: tuple[str, ...]) -> None:
        shown = _short(printable(member.name))
        try:
            if member.isdir():
                self._directories(parts)
                return
            self._directories(parts[:-1])
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
            out = os.fdopen(os.open(self.target.joinpath(*parts), flags, 0o644), "wb")
        except OSError as error:
            raise ArchiveError(f"{self.label}: cannot create '{shown}' ({error.strerror})") from error
        with out:
            written = self._copy(tar.extractfile(member), out, member.size, shown)
        if written != member.size:
            raise ArchiveError(f"{self.label}: member '{shown}' holds {written} of the {member.size} bytes its "
                               f"header declares")
        self.files.append("/".join(parts))

    def _directories(self, parts: tuple[str, ...]) -> None:
        # One level at a time: a recursive mkdir would overflow the stack on a deeply nested member.
        for depth in range(1, len(parts) + 1):
            if parts[:depth] not in self.directories:
                self.target.joinpath(*parts[:depth]).mkdir(exist_ok=True)
                self.directories.add(parts[:depth])

    def _copy(self, source, out, declared: int, shown: str) -> int:
        written = 0
        while block := source.read(READ_BYTES):  # errors reading the archive propagate as such
            written += len(block)
            self.written_bytes += len(block)
            if written > min(declared, self.limits.member_bytes):
                raise ArchiveError(f"{self.label}: member '{shown}' holds more than the {declared} bytes its header "
                                   f"declares (max_member_bytes {self.limits.member_bytes})")
            if self.written_bytes > self.limits.total_bytes:
                raise ArchiveError(f"{self.label}: wrote more than {self.limits.total_bytes} bytes "
                                   f"(max_extracted_bytes)")
            try:
                out.write(block)
                out.flush()
            except OSError as error:
                raise ArchiveError(f"{self.label}: cannot write '{shown}' ({error.strerror})") from error
        return written


# --- Clip checks ---------------------------------------------------------------------------------------------

InvalidClipError = wav.InvalidWavError  # a clip is not 16-bit PCM WAV as Speech Commands stores it; the reason


def check_clip(data: bytes, expected_rate: int | None = SAMPLE_RATE) -> wav.Pcm16:
    """A clip's samples, required to be mono 16-bit PCM, whole, not empty, at ``expected_rate`` (None: any rate)."""
    clip = wav.read_mono_pcm16(data)
    if expected_rate is not None and clip.sample_rate != expected_rate:
        raise InvalidClipError(f"sample rate {clip.sample_rate} Hz, expected {expected_rate} Hz")
    return clip
