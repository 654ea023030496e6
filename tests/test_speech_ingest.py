"""Speech Commands ingestion on a tiny generated corpus that holds every kind of bad file."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import re
import struct
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest
from wav_files import wav_bytes

from training import storage
from training.speech import ingest as speech_ingest
from training.speech import speech_commands as layout
from training.speech.speech_commands import OPEN_SET_WORDS

SPEAKERS = ["0a7c2a8d", "1b2c3d4e", "8b775397", "9f8e7d6c", "c0ffee00", "deadbeef"]


def tone(frequency: float, seconds: float = 0.8, rate: int = 16_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (8000 * np.sin(2 * np.pi * frequency * t)).astype(np.int16)


GOOD = wav_bytes(tone(440))
BAD_FILES = {  # file name in "yes/" → expected reason fragment
    "empty_nohash_0.wav": (b"", "empty file"),
    "text_nohash_0.wav": (b"this is not audio at all", "not a WAV file"),
    "header_nohash_0.wav": (GOOD[:30], "truncated"),
    "data_nohash_0.wav": (GOOD[:2000], "truncated"),
    "stereo_nohash_0.wav": (wav_bytes(np.repeat(tone(440), 2), channels=2), "2 channels"),
    "rate_nohash_0.wav": (wav_bytes(tone(440, rate=8000), rate=8000), "sample rate 8000 Hz"),
    "zero_nohash_0.wav": (wav_bytes(np.zeros(0, np.int16)), "zero-length"),
    "eightbit_nohash_0.wav": (wav_bytes(np.full(8000, 128, np.uint8), width=1), "not 16-bit PCM"),
}


def make_corpus(root: Path, words: tuple[str, ...] = ("yes", "no", "up", "cat", "dog"), bad: bool = True,
                lists: bool = False) -> Path:
    for number, word in enumerate(words):
        (root / word).mkdir(parents=True)
        for speaker in SPEAKERS:
            samples = tone(200 + 100 * number + SPEAKERS.index(speaker))
            (root / word / f"{speaker}_nohash_0.wav").write_bytes(wav_bytes(samples))
    if bad:
        for name, (content, _) in BAD_FILES.items():
            (root / "yes" / name).write_bytes(content)
    noise = root / layout.BACKGROUND_NOISE
    noise.mkdir()
    rng = np.random.default_rng(0)
    (noise / "white_noise.wav").write_bytes(wav_bytes((rng.normal(0, 3000, 48_000)).astype(np.int16)))
    if lists:  # as Speech Commands' own lists: every clip of a speaker in one list, or in none
        (root / "validation_list.txt").write_text("".join(f"{word}/{SPEAKERS[0]}_nohash_0.wav\n" for word in words))
        (root / "testing_list.txt").write_text("".join(f"{word}/{SPEAKERS[1]}_nohash_0.wav\n" for word in words))
    return root


def test_every_bad_clip_is_skipped_with_its_reason(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)
    assert created
    report = speech_ingest.read_report(manifest["uri"])
    reasons = {entry["path"]: entry["reason"] for entry in report["skipped"]}
    for name, (_, fragment) in BAD_FILES.items():
        assert fragment in reasons[f"yes/{name}"], (name, reasons[f"yes/{name}"])
    assert manifest["skipped"] == len(BAD_FILES)
    assert report["clips_read"] == 5 * len(SPEAKERS)
    # every good clip is in exactly one split, as 1 s int16
    total_keywords = sum(manifest["splits"][split]["class_histogram"][2 + i]
                         for split in manifest["splits"] for i in range(3))
    assert total_keywords == 3 * len(SPEAKERS)
    audio, table = speech_ingest.read_clips(manifest["uri"], "train")
    assert audio.shape[1] == 16_000 and audio.dtype == np.int16
    assert len(audio) == manifest["splits"]["train"]["rows"]


def test_other_rates_are_resampled_when_asked(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12, resample=True)
    report = speech_ingest.read_report(manifest["uri"])
    assert report["resampled"] == ["yes/rate_nohash_0.wav"]
    assert all("rate_nohash" not in entry["path"] for entry in report["skipped"])
    split = layout.which_set("yes/rate_nohash_0.wav").replace("training", "train").replace("testing", "test")
    audio, table = speech_ingest.read_clips(manifest["uri"], split)
    row = table.column("path").to_pylist().index("yes/rate_nohash_0.wav")
    spectrum = np.abs(np.fft.rfft(audio[row].astype(np.float64)))
    assert abs(np.argmax(spectrum) - 440) <= 2  # 440 Hz survives at 16 kHz (1 Hz per bin over 1 s)


def test_twelve_class_labels_unknown_and_silence(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12, seed=3)
    assert manifest["class_names"][:2] == [layout.SILENCE, layout.UNKNOWN]
    assert manifest["class_names"][2:] == list(layout.KEYWORDS)
    for stats in manifest["splits"].values():
        keywords = sum(stats["class_histogram"][2:])
        if keywords:
            assert stats["class_histogram"][0] == -(-keywords // 10)  # ceil(10 %)
            assert 0 < stats["class_histogram"][1] <= -(-keywords // 10)
    _, table = speech_ingest.read_clips(manifest["uri"], "train")
    words, labels = table.column("word").to_pylist(), table.column("label").to_pylist()
    assert {word for word, label in zip(words, labels, strict=False) if label == 1} <= {"cat", "dog"}


def test_the_training_unknown_share_follows_its_setting_and_other_splits_keep_ten_percent(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", words=("yes", "no", "cat", "dog", "bird", "tree"), bad=False,
                         lists=True)
    default, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "default"), task=12, seed=3)
    assert "train_unknown_percentage" not in default["recipe"]  # datasets made before the setting stay valid
    larger, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "larger"), task=12, seed=3,
                                     train_unknown_percentage=150)
    assert larger["recipe"]["train_unknown_percentage"] == 150
    train = larger["splits"]["train"]
    keywords = sum(train["class_histogram"][2:])
    # ceil(150 % of the keyword clips), capped by the non-keyword clips there are (cat and bird per speaker: dog
    # and tree are open-set words, never trained on; "speakers" counts _silence_ too)
    assert train["class_histogram"][1] == min(-(-keywords * 150 // 100), 2 * (train["speakers"] - 1))
    assert train["class_histogram"][1] > default["splits"]["train"]["class_histogram"][1]
    for split in ("validation", "test", speech_ingest.NON_KEYWORD_TEST_SPLIT):  # unchanged by the setting
        assert larger["splits"][split] == default["splits"][split], split
    with pytest.raises(ValueError, match="train_unknown_percentage must be in"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "bad"), task=12, train_unknown_percentage=-1)
    assert not (tmp_path / "bad").exists()


def test_thirty_five_class_task_uses_every_word(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert manifest["class_names"] == ["cat", "dog", "no", "up", "yes"]
    assert sum(sum(stats["class_histogram"]) for stats in manifest["splits"].values()) == 5 * len(SPEAKERS)


def test_split_lists_win_over_the_hash_rule(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    _, test_table = speech_ingest.read_clips(manifest["uri"], "test")
    assert sorted(test_table.column("path").to_pylist()) == [f"{word}/{SPEAKERS[1]}_nohash_0.wav"
                                                            for word in ("cat", "dog", "no", "up", "yes")]
    _, validation_table = speech_ingest.read_clips(manifest["uri"], "validation")
    assert set(validation_table.column("speaker").to_pylist()) == {SPEAKERS[0]}  # train by the sha1 rule
    assert manifest["splits"]["validation"]["rows"] == 5
    assert speech_ingest.read_report(manifest["uri"])["split_rule"].startswith("validation_list")


def test_rerun_is_a_no_op_and_a_failure_publishes_nothing(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    destination = str(tmp_path / "clips")
    first, created = speech_ingest.ingest(str(corpus), destination)
    again, created_again = speech_ingest.ingest(str(corpus), destination)
    assert created and not created_again and again["data_version"] == first["data_version"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(storage.DatasetError, match="no word directories"):
        speech_ingest.ingest(str(empty), str(tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_archive_with_a_traversal_member_writes_nothing(tmp_path):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        good = tarfile.TarInfo("yes/0a7c2a8d_nohash_0.wav")
        good.size = len(GOOD)
        tar.addfile(good, io.BytesIO(GOOD))
        evil = tarfile.TarInfo("../../escaped.txt")
        evil.size = 4
        tar.addfile(evil, io.BytesIO(b"evil"))
    with pytest.raises(layout.UnsafeArchiveError, match="climbs out"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()
    assert not list(tmp_path.rglob("escaped.txt")) and not (tmp_path.parent / "escaped.txt").exists()


def test_a_tar_gz_source_with_its_sha256(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    archive = tmp_path / "speech_commands_test.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(corpus.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(corpus)), recursive=False)
    import hashlib

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(storage.DatasetError, match="sha256 mismatch"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"), expected_sha256="0" * 64)
    manifest, _ = speech_ingest.ingest(str(archive), str(tmp_path / "clips"), task=35, expected_sha256=digest)
    assert sum(stats["rows"] for stats in manifest["splits"].values()) == 5 * len(SPEAKERS)


def test_a_url_source_is_downloaded_checked_and_ingested(tmp_path, serve):
    import hashlib
    import shutil

    corpus = make_corpus(tmp_path / "corpus", bad=False)
    www = tmp_path / "www"
    www.mkdir()
    archive = Path(shutil.make_archive(str(www / "speech_commands_test"), "gztar", corpus))
    server = serve(www)
    url = f"{server.root}{archive.name}"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    manifest, _ = speech_ingest.ingest(url, str(tmp_path / "clips"), task=35, expected_sha256=digest)
    assert manifest["source"] == url and server.requested == [f"/{archive.name}"]
    assert sum(stats["rows"] for stats in manifest["splits"].values()) == 5 * len(SPEAKERS)
    with pytest.raises(storage.DatasetError, match="download failed"):
        speech_ingest.ingest(f"{server.root}missing.tar.gz", str(tmp_path / "other"))
    assert not (tmp_path / "other").exists()


def test_the_real_archives_extra_files_are_neither_clips_nor_errors(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    (corpus / "README.md").write_text("Speech Commands")  # the real v0.01/v0.02 archives carry these
    (corpus / "LICENSE").write_text("CC BY 4.0")
    (corpus / layout.BACKGROUND_NOISE / "README.md").write_text("about the noise files")
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)
    assert manifest["skipped"] == 0 and manifest["noise_files"] == ["white_noise.wav"]


def test_a_corrupt_archive_is_a_clear_error_and_publishes_nothing(tmp_path):
    archive = tmp_path / "broken.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + b"not really gzip" * 10)
    with pytest.raises(storage.DatasetError, match="not a readable .tar/.tar.gz archive"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()


# --- Hostile inputs: each is skipped with a reason, or refused as one error that publishes and leaves nothing --


def archive_of(corpus: Path, archive: Path, compresslevel: int = 9, extra: tuple = ()) -> Path:
    """A .tar.gz of a corpus directory (names kept as raw bytes), plus extra (TarInfo, bytes) members at the end."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(corpus.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(corpus)), recursive=False)
        for info, content in extra:
            tar.addfile(info, io.BytesIO(content))
    archive.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=compresslevel, mtime=0))
    return archive


def row_of(manifest: dict, path: str) -> np.ndarray:
    for split in manifest["splits"]:
        audio, table = speech_ingest.read_clips(manifest["uri"], split)
        paths = table.column("path").to_pylist()
        if path in paths:
            return audio[paths.index(path)]
    raise AssertionError(f"{path} is in no split")


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """The temporary directory ingestion works in, so a test can see what it leaves behind."""
    directory = tmp_path / "scratch"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


@pytest.mark.parametrize("riff_size", [36 + 1000, 4, 0xFFFF_FFFF])
def test_a_clip_is_read_by_its_data_chunk_whatever_its_riff_size_says(tmp_path, riff_size):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    samples = tone(523)
    data = bytearray(wav_bytes(samples))
    data[4:8] = struct.pack("<I", riff_size)
    (corpus / "yes" / f"{SPEAKERS[0]}_nohash_1.wav").write_bytes(bytes(data))
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert manifest["skipped"] == 0
    clip = row_of(manifest, f"yes/{SPEAKERS[0]}_nohash_1.wav")
    np.testing.assert_array_equal(clip[: len(samples)], samples)  # every sample, none zeroed
    assert not clip[len(samples) :].any()  # 0.8 s padded to 1 s, as always


def write_badly_named_files(corpus: Path) -> None:
    root = os.fsencode(corpus)
    for relative in (b"yes/caf\xe9_nohash_0.wav", b"_background_noise_/r\xe4uschen.wav"):
        with open(root + b"/" + relative, "wb") as handle:
            handle.write(GOOD)
    os.mkdir(root + b"/n\xf6")
    with open(root + b"/n\xf6/" + SPEAKERS[0].encode() + b"_nohash_0.wav", "wb") as handle:
        handle.write(GOOD)


def test_names_that_are_not_utf8_in_a_directory_are_skipped_and_the_rest_ingested(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    write_badly_named_files(corpus)
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    report = speech_ingest.read_report(manifest["uri"])
    assert sorted((entry["path"], entry["reason"]) for entry in report["skipped"]) == [
        ("_background_noise_/r\\xe4uschen.wav", "file name is not valid UTF-8"),
        ("n\\xf6/", "directory name is not valid UTF-8 (not read)"),
        ("yes/caf\\xe9_nohash_0.wav", "file name is not valid UTF-8"),
    ]
    assert report["clips_read"] == 5 * len(SPEAKERS) and manifest["noise_files"] == ["white_noise.wav"]


def test_names_that_are_not_utf8_in_an_archive_are_skipped_and_the_rest_ingested(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    write_badly_named_files(corpus)
    archive = archive_of(corpus, tmp_path / "corpus.tar.gz")
    manifest, _ = speech_ingest.ingest(str(archive), str(tmp_path / "clips"), task=35)
    report = speech_ingest.read_report(manifest["uri"])
    assert sorted((entry["path"], entry["reason"]) for entry in report["skipped"]) == [
        ("_background_noise_/r\\xe4uschen.wav", "file name is not valid UTF-8"),
        (f"n\\xf6/{SPEAKERS[0]}_nohash_0.wav", "file name is not valid UTF-8"),
        ("yes/caf\\xe9_nohash_0.wav", "file name is not valid UTF-8"),
    ]
    assert report["clips_read"] == 5 * len(SPEAKERS) and manifest["skipped"] == 3


def test_a_wrapped_archives_skipped_names_are_relative_to_the_corpus(tmp_path):
    make_corpus(tmp_path / "wrapper" / "speech_commands", bad=False)
    write_badly_named_files(tmp_path / "wrapper" / "speech_commands")
    archive = archive_of(tmp_path / "wrapper", tmp_path / "wrapped.tar.gz")
    manifest, _ = speech_ingest.ingest(str(archive), str(tmp_path / "clips"), task=35)
    paths = sorted(entry["path"] for entry in speech_ingest.read_report(manifest["uri"])["skipped"])
    assert paths[-1] == "yes/caf\\xe9_nohash_0.wav"


def file_info(name: str, size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


UNEXTRACTABLE = {
    "file where a directory is": ((file_info("yes"), b"x"), "file 'yes' has the name of a directory"),
    "member below a file": ((file_info("README.md/x.wav"), b"x"), "lies below the regular file 'README.md'"),
    "name too long": ((file_info(f"yes/{'a' * 300}.wav"), b"x"), "has a name of 304 bytes"),
}


@pytest.mark.parametrize("case", UNEXTRACTABLE, ids=list(UNEXTRACTABLE))
def test_an_archive_that_cannot_be_extracted_is_one_error_and_leaves_nothing(tmp_path, scratch, case):
    member, message = UNEXTRACTABLE[case]
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    (corpus / "README.md").write_text("Speech Commands")
    archive = archive_of(corpus, tmp_path / "corpus.tar.gz", extra=(member,))
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(str(archive))}: .*{message}") as raised:
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "clips").exists() and list(scratch.iterdir()) == []


def test_an_os_error_during_extraction_is_one_error_and_leaves_nothing(tmp_path, scratch, monkeypatch):
    archive = archive_of(make_corpus(tmp_path / "corpus", bad=False), tmp_path / "corpus.tar.gz")
    real_open = os.open

    def read_only_filesystem(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(layout.os, "open", read_only_filesystem)
    with pytest.raises(storage.DatasetError, match="cannot create .* \\(Read-only file system\\)"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists() and list(scratch.iterdir()) == []


def test_archive_size_limits_are_ingest_arguments_whose_defaults_fit_speech_commands_v002(tmp_path, scratch):
    assert layout.MAX_MEMBER_BYTES >= 3 * 6_000_000  # the longest background-noise recording
    assert layout.MAX_EXTRACTED_BYTES >= 2 * 3_300_000_000  # v0.02 extracted
    assert layout.MAX_ARCHIVE_MEMBERS >= 2 * (105_829 + 6 + 4 + 36)  # clips, noises, text files, directories
    archive = archive_of(make_corpus(tmp_path / "corpus", bad=False), tmp_path / "corpus.tar.gz")
    for limit, message in ({"max_member_bytes": 30_000}, "more than the 30000 allowed per member"), \
                          ({"max_extracted_bytes": 100_000}, "extracts to more than 100000 bytes"), \
                          ({"max_archive_members": 10}, "more than 10 members"):
        with pytest.raises(storage.DatasetError, match=message):
            speech_ingest.ingest(str(archive), str(tmp_path / "clips"), **limit)
        assert not (tmp_path / "clips").exists() and list(scratch.iterdir()) == []
    manifest, _ = speech_ingest.ingest(str(archive), str(tmp_path / "clips"), task=35, max_member_bytes=100_000,
                                       max_extracted_bytes=2_000_000, max_archive_members=100)
    assert sum(stats["rows"] for stats in manifest["splits"].values()) == 5 * len(SPEAKERS)


def test_a_flipped_bit_in_the_gzip_stream_publishes_nothing(tmp_path, scratch):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    clip = (corpus / "yes" / f"{SPEAKERS[0]}_nohash_0.wav").read_bytes()
    archive = archive_of(corpus, tmp_path / "corpus.tar.gz", compresslevel=0)
    data = bytearray(archive.read_bytes())
    data[data.index(clip[1000:1100]) + 50] ^= 0x01  # stored, not deflated: one sample of one clip changes
    archive.write_bytes(bytes(data))
    with pytest.raises(storage.DatasetError, match="not a readable .tar/.tar.gz archive \\(CRC check failed"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists() and list(scratch.iterdir()) == []


def test_a_truncated_gzip_publishes_nothing(tmp_path, scratch):
    archive = archive_of(make_corpus(tmp_path / "corpus", bad=False), tmp_path / "corpus.tar.gz")
    archive.write_bytes(archive.read_bytes()[:-8])  # the tar inside is whole; the gzip trailer is gone
    with pytest.raises(storage.DatasetError, match="not a readable .tar/.tar.gz archive"):
        speech_ingest.ingest(str(archive), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists() and list(scratch.iterdir()) == []


def test_a_clip_longer_than_one_second_is_cut_and_listed_with_its_length(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    long_tone = tone(440, seconds=2.0)
    (corpus / "yes" / f"{SPEAKERS[0]}_nohash_2.wav").write_bytes(wav_bytes(long_tone))
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    report = speech_ingest.read_report(manifest["uri"])
    assert report["trimmed"] == [{"path": f"yes/{SPEAKERS[0]}_nohash_2.wav", "samples": 32_000, "seconds": 2.0}]
    assert manifest["trimmed"] == 1
    np.testing.assert_array_equal(row_of(manifest, f"yes/{SPEAKERS[0]}_nohash_2.wav"), long_tone[:16_000])


def test_a_rate_that_cannot_be_resampled_is_skipped_with_its_reason(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    (corpus / "yes" / "slow_nohash_0.wav").write_bytes(wav_bytes(tone(0.5, seconds=0.5, rate=2), rate=2))
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35, resample=True)
    report = speech_ingest.read_report(manifest["uri"])
    assert report["skipped"] == [{"path": "yes/slow_nohash_0.wav",
                                  "reason": "sample rate 2 Hz, outside the 4000–192000 Hz that are resampled"}]


def test_a_split_list_that_is_not_utf8_is_one_error_naming_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    (corpus / "testing_list.txt").write_bytes(b"yes/caf\xe9_nohash_0.wav\n")
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(str(corpus))}: testing_list.txt is not UTF-8 text"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()


def test_a_corpus_whose_lists_leave_validation_empty_is_ingested_with_an_empty_split(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    (corpus / "validation_list.txt").write_text("")
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)
    assert created and manifest["splits"]["validation"]["rows"] == 0
    assert manifest["splits"]["train"]["rows"] > 0 and manifest["splits"]["test"]["rows"] > 0
    audio, table = speech_ingest.read_clips(manifest["uri"], "validation")
    assert audio.shape == (0, speech_ingest.CLIP_SAMPLES) and table.num_rows == 0


def test_a_corpus_without_any_usable_clip_is_refused_and_nothing_is_published(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", words=("yes",), bad=False)
    for clip in (corpus / "yes").iterdir():
        clip.write_bytes(b"not audio")
    with pytest.raises(storage.DatasetError, match="no usable clips"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)
    assert storage.read_manifest(str(tmp_path / "clips")) is None


FAMILIES = {"0a7c2a8d": "espeak-ng/en-us", "1b2c3d4e": "espeak-ng/en-us", "8b775397": "pico/en-GB",
            "9f8e7d6c": "pico/en-US", "c0ffee00": "flite/slt", "deadbeef": "espeak-ng/de"}


def corpus_with_families(root: Path, words: tuple[str, ...] = ("yes", "no", "up", "cat", "dog", "bird")) -> Path:
    """A generated corpus whose manifest records each speaker's voice family, as a synthetic corpus' does."""
    from training.speech.synthesis import corpus as synthetic_corpus

    corpus = make_corpus(root, words=words, bad=False)
    voices = [{"speaker": speaker, "engine": family.split("/")[0], "voice": family.split("/")[1], "family": family}
              for speaker, family in FAMILIES.items()]
    (corpus / storage.MANIFEST_NAME).write_text(json.dumps(
        {"kind": synthetic_corpus.DATASET_KIND, "speaker_voices": voices}))
    return corpus


def test_voice_families_are_recorded_and_held_out_families_go_to_test_only(tmp_path):
    corpus = corpus_with_families(tmp_path / "corpus")
    plain = speech_ingest.ingest(str(corpus), str(tmp_path / "plain"), task=12)[0]
    assert plain["voice_families"] == FAMILIES and plain["held_out_families"] == []
    assert sum(sum(split["families"].values()) for name, split in plain["splits"].items()
               if name != speech_ingest.NON_KEYWORD_TEST_SPLIT) == sum(
        split["rows"] - split["class_histogram"][0] for name, split in plain["splits"].items()
        if name != speech_ingest.NON_KEYWORD_TEST_SPLIT)  # every row but silence has a family
    held = speech_ingest.ingest(str(corpus), str(tmp_path / "held"), task=12, held_out_families=("pico",
                                                                                                 "flite/slt"))[0]
    assert held["held_out_families"] == ["flite/slt", "pico"]
    held_out_speakers = {"8b775397", "9f8e7d6c", "c0ffee00"}
    for split in ("train", "validation"):
        _, table = speech_ingest.read_clips(held["uri"], split)
        assert not held_out_speakers & set(table.column("speaker").to_pylist()), split
        assert not {"pico/en-GB", "pico/en-US", "flite/slt"} & set(held["splits"][split]["families"])
    _, test = speech_ingest.read_clips(held["uri"], "test")
    keyword_rows = [(speaker, word) for speaker, word in zip(test.column("speaker").to_pylist(),
                                                              test.column("word").to_pylist(), strict=True)
                    if word in ("yes", "no", "up")]
    assert {speaker for speaker, _ in keyword_rows} >= held_out_speakers  # every keyword clip of theirs is in test
    assert len([1 for speaker, _ in keyword_rows if speaker in held_out_speakers]) == 3 * 3


@pytest.mark.parametrize(("held_out", "message"), [
    (("festival/kal",), "festival/kal not in this corpus; its families: espeak-ng/de, espeak-ng/en-us, flite/slt"),
    (("espeak-ng", "pico", "flite"), "names every voice family of the corpus: nothing left to train on"),
])
def test_held_out_families_that_hold_nothing_or_everything_are_refused(tmp_path, held_out, message):
    with pytest.raises(storage.DatasetError, match=re.escape(message)):
        speech_ingest.ingest(str(corpus_with_families(tmp_path / "corpus")), str(tmp_path / "clips"),
                             held_out_families=held_out)
    assert storage.read_manifest(str(tmp_path / "clips")) is None


def test_held_out_families_need_a_corpus_that_records_families(tmp_path):
    with pytest.raises(storage.DatasetError, match="needs a corpus that records each speaker's voice family"):
        speech_ingest.ingest(str(make_corpus(tmp_path / "corpus", bad=False)), str(tmp_path / "clips"),
                             held_out_families=("pico",))


@pytest.mark.parametrize("content", ["{not json", json.dumps({"kind": "speech_commands_synthetic",
                                                               "speaker_voices": [{"engine": "pico"}]})])
def test_a_broken_corpus_manifest_is_ignored_or_refused_in_one_line(tmp_path, content):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    (corpus / storage.MANIFEST_NAME).write_text(content)
    if content.startswith("{not"):
        assert speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))[0]["voice_families"] == {}
    else:
        with pytest.raises(storage.DatasetError, match="speaker voices without a speaker or family"):
            speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))


def test_every_non_keyword_clip_of_the_test_speakers_is_kept_for_false_accepts(tmp_path):
    # cat and bird are trained on as _unknown_ (closed set); dog is an open-set word, never trained on.
    assert "dog" in OPEN_SET_WORDS and not {"cat", "bird"} & set(OPEN_SET_WORDS)
    corpus = corpus_with_families(tmp_path / "corpus")
    manifest = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12,
                                    held_out_families=("espeak-ng/de",))[0]
    _, test = speech_ingest.read_clips(manifest["uri"], "test")
    test_speakers = set(test.column("speaker").to_pylist()) - {"_silence_"}
    unknown = manifest["class_names"].index("_unknown_")
    for split, words in ((speech_ingest.NON_KEYWORD_TEST_SPLIT, ("cat", "bird")),
                         (speech_ingest.OPEN_SET_TEST_SPLIT, ("dog",))):
        _, kept = speech_ingest.read_clips(manifest["uri"], split)
        expected = {f"{word}/{speaker}_nohash_0.wav" for word in words for speaker in test_speakers}
        assert set(kept.column("path").to_pylist()) == expected, split
        assert set(kept.column("label").to_pylist()) == {unknown}
    sampled = [path for path, word in zip(test.column("path").to_pylist(), test.column("word").to_pylist(),
                                          strict=True) if word in ("cat", "bird")]
    assert sampled and all(path.split("/")[0] in ("cat", "bird") for path in sampled)


def test_no_open_set_word_is_in_any_split_a_model_trains_validates_or_is_tested_on(tmp_path):
    corpus = corpus_with_families(tmp_path / "corpus")
    manifest = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)[0]
    for split in ("train", "validation", "test", speech_ingest.NON_KEYWORD_TEST_SPLIT):
        _, table = speech_ingest.read_clips(manifest["uri"], split)
        assert not set(table.column("word").to_pylist()) & set(OPEN_SET_WORDS), split
    _, open_set = speech_ingest.read_clips(manifest["uri"], speech_ingest.OPEN_SET_TEST_SPLIT)
    assert set(open_set.column("word").to_pylist()) == {"dog"}
    # the validation speakers' clips of them (what the keyword threshold is chosen on), and nobody else's
    _, validation = speech_ingest.read_clips(manifest["uri"], "validation")
    validation_speakers = set(validation.column("speaker").to_pylist()) - {"_silence_"}
    _, validation_open_set = speech_ingest.read_clips(manifest["uri"], speech_ingest.OPEN_SET_VALIDATION_SPLIT)
    assert validation_speakers == {"8b775397"}  # by Speech Commands' sha1 rule
    assert set(validation_open_set.column("path").to_pylist()) == {"dog/8b775397_nohash_0.wav"}
    assert set(validation_open_set.column("label").to_pylist()) == {manifest["class_names"].index("_unknown_")}
    assert not set(open_set.column("speaker").to_pylist()) & validation_speakers
    # the 35-class task has a class per word: open-set words are classes there, as in Speech Commands
    manifest35 = speech_ingest.ingest(str(corpus), str(tmp_path / "clips35"), task=35)[0]
    assert "dog" in manifest35["class_names"]
    assert not {speech_ingest.OPEN_SET_TEST_SPLIT, speech_ingest.OPEN_SET_VALIDATION_SPLIT} & set(manifest35["splits"])


def test_unknown_is_dealt_evenly_over_the_non_keyword_words():
    clips = {"bird": [(f"bird/{n:08x}_nohash_0.wav", None) for n in range(50)],
             "cat": [(f"cat/{n:08x}_nohash_0.wav", None) for n in range(3)],
             "dog": [(f"dog/{n:08x}_nohash_0.wav", None) for n in range(20)]}
    chosen = speech_ingest._sample_evenly_by_word(clips, 13, np.random.default_rng(0))
    counts = {word: sum(1 for chosen_word, _, _ in chosen if chosen_word == word) for word in clips}
    assert counts == {"bird": 5, "cat": 3, "dog": 5}
    assert len({path for _, path, _ in chosen}) == 13
    assert len(speech_ingest._sample_evenly_by_word(clips, 500, np.random.default_rng(0))) == 73


# --- Files that are not what their names say, and lists that would put a clip in the wrong split ---------------

NOT_READ = "not a regular file; only regular files are read"


def skipped_reasons(manifest: dict) -> dict[str, str]:
    return {entry["path"]: entry["reason"] for entry in speech_ingest.read_report(manifest["uri"])["skipped"]}


def listed(corpus: Path, list_name: str) -> list[str]:
    return (corpus / list_name).read_text().splitlines()


@pytest.mark.timeout(60)
def test_a_fifo_named_like_a_clip_is_skipped_unopened(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    os.mkfifo(corpus / "yes" / "fifo_nohash_0.wav")
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert created and skipped_reasons(manifest) == {"yes/fifo_nohash_0.wav": f"a FIFO, {NOT_READ}"}


@pytest.mark.timeout(60)
def test_a_fifo_in_the_background_noise_folder_is_skipped_unopened(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    os.mkfifo(corpus / layout.BACKGROUND_NOISE / "fifo.wav")
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert created and manifest["noise_files"] == ["white_noise.wav"]
    assert skipped_reasons(manifest) == {f"{layout.BACKGROUND_NOISE}/fifo.wav": f"a FIFO, {NOT_READ}"}


@pytest.mark.timeout(60)
def test_a_link_to_dev_zero_in_the_background_noise_folder_is_skipped_unread(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    (corpus / layout.BACKGROUND_NOISE / "zeros.wav").symlink_to("/dev/zero")
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert manifest["noise_files"] == ["white_noise.wav"]
    assert skipped_reasons(manifest) == {f"{layout.BACKGROUND_NOISE}/zeros.wav": f"a character device, {NOT_READ}"}


def test_a_file_larger_than_max_member_bytes_is_skipped_unread_from_a_directory_too(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False)  # clips of 25,644 bytes, a noise file of 96,044
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35, max_member_bytes=40_000)
    assert manifest["noise_files"] == [] and manifest["skipped"] == 1
    assert skipped_reasons(manifest) == {f"{layout.BACKGROUND_NOISE}/white_noise.wav":
                                         "96,044 bytes, more than the 40,000 a WAV file may hold here"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sha256", ["", "0" * 64])
def test_a_fifo_given_as_the_archive_is_refused_unopened_in_one_line(tmp_path, sha256):
    fifo = tmp_path / "speech_commands_v0.02.tar.gz"
    os.mkfifo(fifo)
    expected = f"^{re.escape(str(fifo))}: a FIFO, not a regular file; .*data_source must be a corpus directory or"
    with pytest.raises(storage.DatasetError, match=expected):
        speech_ingest.ingest(str(fifo), str(tmp_path / "clips"), expected_sha256=sha256)
    assert not (tmp_path / "clips").exists()


@pytest.mark.timeout(60)
def test_a_corpus_manifest_that_is_a_fifo_is_ignored_unopened(tmp_path, caplog):
    corpus = make_corpus(tmp_path / "corpus", bad=False)
    os.mkfifo(corpus / storage.MANIFEST_NAME)
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert created and manifest["voice_families"] == {}
    assert any(f"ignoring {storage.MANIFEST_NAME} (a FIFO" in record.getMessage() for record in caplog.records)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("kind", "expected"), [("fifo", "a FIFO"), ("device", "a character device"),
                                                ("directory", "a directory"), ("dangling", "cannot be read")])
def test_a_split_list_that_is_not_a_regular_file_is_refused_naming_it(tmp_path, kind, expected):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    list_file = corpus / "validation_list.txt"
    list_file.unlink()
    {"fifo": lambda: os.mkfifo(list_file), "device": lambda: list_file.symlink_to("/dev/zero"),
     "directory": list_file.mkdir, "dangling": lambda: list_file.symlink_to(tmp_path / "gone.txt")}[kind]()
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(str(corpus))}: validation_list.txt: {expected}"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()


def test_a_split_list_larger_than_any_real_one_is_refused_naming_it(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    monkeypatch.setattr(speech_ingest, "MAX_LIST_BYTES", 100)
    size = (corpus / "validation_list.txt").stat().st_size
    expected = f"^{re.escape(str(corpus))}: validation_list.txt: {size} bytes, more than the 100 a list file may hold"
    with pytest.raises(storage.DatasetError, match=expected):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()


def test_a_list_saved_with_a_byte_order_mark_and_crlf_keeps_its_first_clip_out_of_training(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    names = {list_name: listed(corpus, list_name) for list_name in ("validation_list.txt", "testing_list.txt")}
    for list_name, list_names in names.items():
        (corpus / list_name).write_bytes(b"\xef\xbb\xbf" + "\r\n".join(list_names).encode() + b"\r\n")
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    _, validation = speech_ingest.read_clips(manifest["uri"], "validation")
    assert sorted(validation.column("path").to_pylist()) == sorted(names["validation_list.txt"])
    assert not {SPEAKERS[0], SPEAKERS[1]} & speech_ingest.split_speakers(manifest["uri"], "train")
    assert speech_ingest.read_report(manifest["uri"])["unmatched_list_names"] == {}


def test_a_listed_name_without_a_file_is_reported_and_warned_about(tmp_path, caplog):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    with (corpus / "testing_list.txt").open("a") as out:
        out.write("yes/gone_nohash_0.wav\n")
    manifest, created = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    assert created
    report = speech_ingest.read_report(manifest["uri"])
    assert report["unmatched_list_names"] == {"testing_list.txt": ["yes/gone_nohash_0.wav"]}
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert (f"{corpus}: 1 name in testing_list.txt matches no clip of the corpus (first: yes/gone_nohash_0.wav); "
            f"all are listed in {speech_ingest.REPORT_NAME}") in warnings


def test_blank_lines_and_spaces_are_ignored_and_names_outside_the_corpus_reported(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", lists=True)  # with the bad clips: a listed skipped clip is no typo
    names = listed(corpus, "validation_list.txt")
    (corpus / "validation_list.txt").write_text("\n   \n" + "".join(f"  {name}\t \n" for name in names)
                                                + "../outside_nohash_0.wav\n/yes/absolute_nohash_0.wav\n"
                                                + "yes/empty_nohash_0.wav\n\n")
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=35)
    _, validation = speech_ingest.read_clips(manifest["uri"], "validation")
    assert sorted(validation.column("path").to_pylist()) == sorted(names)
    assert speech_ingest.read_report(manifest["uri"])["unmatched_list_names"] == {
        "validation_list.txt": ["../outside_nohash_0.wav", "/yes/absolute_nohash_0.wav"]}


def test_a_speaker_in_both_lists_is_refused_naming_the_speaker_a_clip_from_each_and_both_lists(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    moved = f"no/{SPEAKERS[0]}_nohash_0.wav"
    (corpus / "validation_list.txt").write_text("".join(f"{name}\n" for name in listed(corpus, "validation_list.txt")
                                                        if name != moved))
    with (corpus / "testing_list.txt").open("a") as out:
        out.write(f"{moved}\n")
    expected = (f"{corpus}: speaker '{SPEAKERS[0]}' has clips in validation_list.txt (cat/{SPEAKERS[0]}_nohash_0.wav)"
                f" and clips in testing_list.txt ({moved}); a speaker's clips must all be in one list, or all in none "
                "(training): fix the lists")
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(expected)}$"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()


def test_a_speaker_listed_only_in_part_is_refused_too(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", bad=False, lists=True)
    (corpus / "testing_list.txt").write_text(f"yes/{SPEAKERS[1]}_nohash_0.wav\n")  # the rest would train
    expected = (f"{corpus}: speaker '{SPEAKERS[1]}' has clips in testing_list.txt (yes/{SPEAKERS[1]}_nohash_0.wav) "
                f"and clips in no list (cat/{SPEAKERS[1]}_nohash_0.wav); a speaker's clips must")
    with pytest.raises(storage.DatasetError, match=f"^{re.escape(expected)}"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "clips"))
    assert not (tmp_path / "clips").exists()
