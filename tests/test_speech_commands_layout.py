"""Speech Commands layout: the split rule against the real dataset's lists, safe extraction, and clip checks."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from wav_files import wav_bytes

from training.datasets.speech_commands import (
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


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return path


def file_member(name: str, content: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    return info, content


def link_member(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def test_a_clean_archive_extracts_into_the_target(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [file_member("yes/a_nohash_0.wav"), file_member("validation_list.txt")])
    assert safe_extract(archive, tmp_path / "out") == ["validation_list.txt", "yes/a_nohash_0.wav"]
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
