"""Speech Commands layout: the split rule against the real dataset's lists, safe extraction, and clip checks."""

from __future__ import annotations

import errno
import gzip
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from wav_files import wav_bytes

from training import storage
from training.speech import speech_commands
from training.speech.speech_commands import (
    ArchiveError,
    ArchiveLimits,
    InvalidClipError,
    UnsafeArchiveError,
    check_clip,
    safe_extract,
    speaker_of,
    which_set,
)

# From the real Speech Commands v0.02 validation_list.txt: these clips are in the validation split.
REAL_VALIDATION_CLIPS = ["cat/8b775397_nohash_0.wav", "cat/2643992f_nohash_1.wav", "cat/060cd039_nohash_2.wav",
                         "go/6a27a9bf_nohash_0.wav", "four/605ed0ff_nohash_0.wav", "four/bdb26021_nohash_1.wav"]


def test_which_set_puts_the_real_validation_clips_in_validation():
    assert {which_set(path) for path in REAL_VALIDATION_CLIPS} == {"validation"}


def test_which_set_keeps_every_clip_of_a_speaker_together_and_splits_about_80_10_10():
    assert speaker_of("yes/0a7c2a8d_nohash_3.wav") == "0a7c2a8d"
    assert {which_set(f"{word}/0a7c2a8d_nohash_{n}.wav") for word in ("yes", "no") for n in range(5)} == \
        {which_set("up/0a7c2a8d_nohash_0.wav")}
    splits = [which_set(f"yes/{index:08x}_nohash_0.wav") for index in range(5000)]
    shares = {split: splits.count(split) / len(splits) for split in ("training", "validation", "testing")}
    assert 0.77 < shares["training"] < 0.83 and 0.08 < shares["validation"] < 0.12 and 0.08 < shares["testing"] < 0.12


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], tar_format: int = tarfile.GNU_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tar_format) as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    path.write_bytes(gzip.compress(tar_bytes(members), mtime=0))
    return path


def file_member(name: str | bytes, content: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    """A regular file; a bytes name is written as those raw bytes (not necessarily UTF-8)."""
    info = tarfile.TarInfo(os.fsdecode(name) if isinstance(name, bytes) else name)
    info.size = len(content)
    return info, content


def dir_member(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def link_member(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def test_a_clean_archive_extracts_into_the_target(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [file_member("yes/a_nohash_0.wav"), file_member("validation_list.txt")])
    assert safe_extract(archive, tmp_path / "out").files == ["validation_list.txt", "yes/a_nohash_0.wav"]
    assert (tmp_path / "out" / "yes" / "a_nohash_0.wav").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (file_member("../escaped.wav"), "climbs out"),
        (file_member("yes/../../escaped.wav"), "climbs out"),
        (file_member("/tmp/absolute.wav"), "absolute path"),
        (link_member("yes/link.wav", "/etc/passwd"), "is a link"),
        (link_member("yes/hard.wav", "../../escaped.wav", tarfile.LNKTYPE), "is a link"),
    ],
)
def test_an_archive_with_an_unsafe_member_writes_nothing(tmp_path, member, reason):
    archive = make_tar(tmp_path / "bad.tar.gz", [file_member("yes/good_nohash_0.wav"), member])
    with pytest.raises(UnsafeArchiveError, match=reason):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "escaped.wav").exists()


def assert_refused(archive: Path, target: Path, message: str, limits: ArchiveLimits | None = None) -> None:
    """One clear error naming the archive, a DatasetError (so one line from the CLI), and no target left."""
    with pytest.raises(ArchiveError, match=message) as raised:
        safe_extract(archive, target, limits)
    assert isinstance(raised.value, storage.DatasetError)
    assert str(raised.value).startswith(f"{archive}: ") and "\n" not in str(raised.value)
    assert not target.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("make", "kind"), [(os.mkfifo, "a FIFO"),
                                           (lambda path: path.symlink_to("/dev/zero"), "a character device")])
def test_an_archive_that_is_a_fifo_or_a_device_is_refused_unopened(tmp_path, make, kind):
    archive = tmp_path / "speech_commands_v0.02.tar.gz"
    make(archive)
    assert_refused(archive, tmp_path / "out", f"{kind}, not a regular file; only regular files are read")


COLLISIONS = {
    "directory then file": ([dir_member("yes"), file_member("yes")], "file 'yes' has the name of a directory"),
    "file then directory": ([file_member("yes"), dir_member("yes")], "directory 'yes' has the name of an earlier file"),
    "file then a member below it": ([file_member("yes"), file_member("yes/a.wav")],
                                    "member 'yes/a.wav' lies below the regular file 'yes'"),
    "member below, then file of its directory's name": ([file_member("yes/a.wav"), file_member("yes")],
                                                        "file 'yes' has the name of a directory"),
    "file twice": ([file_member("yes/a.wav"), file_member("./yes//a.wav")], "file './yes//a.wav' appears twice"),
    "file with a trailing slash, then below it": ([file_member("yes/"), file_member("yes/a.wav")],
                                                  "lies below the regular file 'yes'"),
}


@pytest.mark.parametrize("case", COLLISIONS, ids=list(COLLISIONS))
def test_members_that_collide_are_refused_and_nothing_is_left(tmp_path, case):
    members, message = COLLISIONS[case]
    archive = make_tar(tmp_path / "collide.tar.gz", [file_member("no/b.wav"), *members])
    assert_refused(archive, tmp_path / "out", message)


def test_a_name_longer_than_the_filesystem_allows_is_refused(tmp_path):
    archive = make_tar(tmp_path / "long.tar.gz", [file_member("yes/a.wav"), file_member(f"yes/{'n' * 300}.wav")])
    assert_refused(archive, tmp_path / "out", "has a name of 304 bytes; this filesystem allows 255")


def test_a_path_longer_than_the_filesystem_allows_is_refused(tmp_path):
    deep = "/".join(["d" * 200] * 25) + "/a.wav"  # every name fits, the path (5,000 bytes) does not
    archive = make_tar(tmp_path / "deep.tar.gz", [file_member(deep)])
    assert_refused(archive, tmp_path / "out", "would have a path longer than this filesystem allows")


def test_a_member_nested_too_deep_is_refused(tmp_path):
    deep = "/".join(["d"] * 1500) + "/a.wav"  # within the path limit, but removing it would overflow the stack
    archive = make_tar(tmp_path / "nested.tar.gz", [file_member(deep)])
    assert_refused(archive, tmp_path / "out", "is nested 1501 levels deep, more than 32")
    ok = "/".join(["d"] * 31) + "/a.wav"
    assert safe_extract(make_tar(tmp_path / "ok.tar.gz", [file_member(ok)]), tmp_path / "ok").files == [ok]


def test_an_os_error_while_writing_is_one_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    archive = make_tar(tmp_path / "ok.tar.gz", [file_member("yes/a.wav"), file_member("yes/b.wav")])
    real_open = os.open

    def disk_full_on_the_second_file(path, *args, **kwargs):
        if str(path).endswith("b.wav"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(speech_commands.os, "open", disk_full_on_the_second_file)
    assert_refused(archive, tmp_path / "out", r"cannot create 'yes/b.wav' \(No space left on device\)")


def test_file_names_that_are_not_utf8_are_skipped_and_listed_the_rest_extracted(tmp_path):
    archive = make_tar(tmp_path / "names.tar.gz", [
        file_member("yes/a.wav"), file_member(b"yes/caf\xe9_nohash_0.wav"), dir_member(os.fsdecode(b"n\xf6")),
        file_member(b"n\xf6/b.wav"), file_member("yes/\u00e9t\u00e9.wav"),
    ])
    extraction = safe_extract(archive, tmp_path / "out")
    assert extraction.files == ["yes/a.wav", "yes/\u00e9t\u00e9.wav"]
    assert extraction.skipped == [
        {"path": "yes/caf\\xe9_nohash_0.wav", "reason": "file name is not valid UTF-8"},
        {"path": "n\\xf6/b.wav", "reason": "file name is not valid UTF-8"},
    ]
    assert sorted(os.listdir(tmp_path / "out")) == ["yes"]


def test_limits_are_checked_from_the_headers_before_anything_is_written(tmp_path):
    archive = make_tar(tmp_path / "big.tar.gz", [file_member("yes/a.wav", b"a" * 100),
                                                  file_member("yes/b.wav", b"b" * 2000),
                                                  file_member("yes/c.wav", b"c" * 100)])
    assert_refused(archive, tmp_path / "out", r"member 'yes/b.wav' is 2000 bytes, more than the 1000 allowed per "
                   r"member \(max_member_bytes\)", ArchiveLimits(member_bytes=1000))
    assert_refused(archive, tmp_path / "out", r"extracts to more than 2100 bytes \(max_extracted_bytes\), at member "
                   r"'yes/c.wav'", ArchiveLimits(total_bytes=2100))
    assert_refused(archive, tmp_path / "out", r"more than 2 members \(max_archive_members\)",
                   ArchiveLimits(members=2))
    assert safe_extract(archive, tmp_path / "out", ArchiveLimits(2000, 2200, 3)).files == [
        "yes/a.wav", "yes/b.wav", "yes/c.wav"]


def test_a_member_holding_more_than_its_header_declares_is_stopped_while_writing(tmp_path, monkeypatch):
    archive = make_tar(tmp_path / "lies.tar.gz", [file_member("yes/a.wav", b"a" * 100)])
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda tar, member: io.BytesIO(b"a" * (10 * member.size)))
    assert_refused(archive, tmp_path / "out", "member 'yes/a.wav' holds more than the 100 bytes its header declares")


def test_a_header_extension_too_large_to_read_is_refused(tmp_path):
    bomb = tarfile.TarInfo("yes/a.wav")
    bomb.pax_headers = {"comment": "x" * (2 * speech_commands.READ_BYTES)}
    archive = tmp_path / "pax.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes([(bomb, b"")], tarfile.PAX_FORMAT)))
    assert_refused(archive, tmp_path / "out", "a tar header extension of .* bytes")


def stored_gzip(data: bytes) -> bytes:
    """gzip without compression: a flipped bit in the body changes one byte of the tar, not the deflate codes."""
    return gzip.compress(data, compresslevel=0, mtime=0)


def flip_bit(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x10]) + data[position + 1 :]


CONTENT = bytes(range(256)) * 40


def test_a_flipped_bit_in_a_gzip_body_is_caught_before_anything_is_written(tmp_path):
    compressed = stored_gzip(tar_bytes([file_member("yes/a.wav", CONTENT)]))
    archive = tmp_path / "flipped.tar.gz"
    archive.write_bytes(flip_bit(compressed, compressed.index(CONTENT[:64]) + 100))
    assert_refused(archive, tmp_path / "out", r"not a readable .tar/.tar.gz archive \(CRC check failed")


@pytest.mark.parametrize("fraction", [0.2, 0.4, 0.6, 0.8, 0.95])
def test_a_flipped_bit_anywhere_in_a_compressed_body_is_refused(tmp_path, fraction):
    compressed = gzip.compress(tar_bytes([file_member("yes/a.wav", wav_bytes(np.arange(8000, dtype=np.int16)))]),
                               mtime=0)
    body_start, trailer = 10, 8  # the header without a file name; CRC-32 and length at the end
    position = body_start + int(fraction * (len(compressed) - body_start - trailer))
    archive = tmp_path / "flipped.tar.gz"
    archive.write_bytes(flip_bit(compressed, position))
    assert_refused(archive, tmp_path / "out", "not a readable .tar/.tar.gz archive|end-of-archive marker")


@pytest.mark.parametrize("cut", [8, 4, 1, 5000], ids=["trailer", "half the trailer", "one byte", "half the body"])
def test_a_truncated_gzip_is_refused(tmp_path, cut):
    compressed = gzip.compress(tar_bytes([file_member("yes/a.wav", CONTENT)]), mtime=0)
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(compressed[:-cut] if cut < 100 else compressed[: len(compressed) // 2])
    assert_refused(archive, tmp_path / "out", "not a readable .tar/.tar.gz archive")


def test_data_after_the_gzip_stream_is_refused(tmp_path):
    archive = tmp_path / "trailing.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes([file_member("yes/a.wav")]), mtime=0) + b"garbage")
    assert_refused(archive, tmp_path / "out", "not a readable .tar/.tar.gz archive")


def test_a_tar_without_its_end_of_archive_marker_is_refused(tmp_path):
    whole = tar_bytes([file_member("yes/a.wav", b"a" * 512), file_member("yes/b.wav", b"b" * 512)])
    archive = tmp_path / "cut.tar"
    archive.write_bytes(whole[: 2 * 512])  # the first member whole, nothing after
    assert_refused(archive, tmp_path / "out", "ends without its end-of-archive marker")
    archive.write_bytes(whole[: 2 * 512 + 100])  # cut inside the second header
    assert_refused(archive, tmp_path / "out", "ends without its end-of-archive marker")
    archive.write_bytes(whole[: 3 * 512 + 100])  # cut inside the second member's data
    assert_refused(archive, tmp_path / "out", "not a readable .tar/.tar.gz archive")


def test_a_header_declaring_less_than_its_data_is_refused(tmp_path):
    info, _ = file_member("yes/a.wav", b"a" * 10)
    whole = bytearray(tar_bytes([(info, b"a" * 10)]))
    whole[512:512] = b"\x01" * 2048  # more data than the header declares: the next "header" is garbage
    archive = tmp_path / "lies.tar"
    archive.write_bytes(bytes(whole))
    assert_refused(archive, tmp_path / "out", "ends without its end-of-archive marker")


@pytest.mark.parametrize("compression", ["bz2", "xz"])
def test_other_compressions_are_verified_whole_too(tmp_path, compression):
    archive = tmp_path / f"ok.tar.{compression}"
    with tarfile.open(archive, f"w:{compression}") as tar:
        info, content = file_member("yes/a.wav", CONTENT)
        tar.addfile(info, io.BytesIO(content))
    assert safe_extract(archive, tmp_path / "out").files == ["yes/a.wav"]
    archive.write_bytes(archive.read_bytes()[:-4])
    assert_refused(archive, tmp_path / "cut", "not a readable .tar/.tar.gz archive")


def test_a_proper_clip_passes_and_each_bad_clip_gets_its_reason():
    one_second = np.zeros(16_000, np.int16)
    assert check_clip(wav_bytes(one_second)).frames == 16_000
    cases = {
        b"": "empty file",
        b"not audio at all": "not a WAV file",
        wav_bytes(one_second)[:30]: "truncated",
        wav_bytes(one_second)[:2000]: "truncated: the data chunk declares",
        wav_bytes(np.zeros(16_000, np.int16), channels=2): "2 channels",
        wav_bytes(np.zeros(8_000, np.int16), rate=8_000): "sample rate 8000 Hz",
        wav_bytes(np.zeros(16_000, np.uint8), width=1): "not 16-bit PCM",
        wav_bytes(np.zeros(0, np.int16)): "zero-length",
    }
    for data, reason in cases.items():
        with pytest.raises(InvalidClipError, match=reason):
            check_clip(data)
