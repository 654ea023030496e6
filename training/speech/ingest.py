"""Ingest a Speech Commands corpus (v0.01, v0.02 or the synthetic one) into a Parquet dataset of labelled clips.

The source may be a directory, a ``.tar.gz``/``.tar`` archive, an http(s) URL of one, or either on HDFS
(``hdfs://…``, a landing zone; copied to local disk first, within the archive limits), optionally checked
against a sha256. Archives are verified whole and extracted safely, within size limits, into a temporary
directory. Every clip is checked: a bad one (empty, not WAV, truncated, stereo, not 16-bit PCM, zero-length, another
sample rate unless ``resample``, a name that is not UTF-8, not a regular file, larger than ``max_member_bytes``) is
skipped and listed with its reason in ``ingest_report.json``; everything else is padded or cut to 1 s, and each clip
cut is listed there too.

Labels follow the keyword task: 12 classes (``_silence_``, ``_unknown_`` and the ten keywords, as TensorFlow's
Speech Commands tutorial orders them; ``_unknown_`` sampled from the other words and ``_silence_`` cut from the
background noise, each about 10 % of a split), or 35 (every word directory is a class). Splits follow
``validation_list.txt``/``testing_list.txt`` or, without them, Speech Commands' sha1 rule on the speaker. Lists
that split a speaker (between both lists, or between a list and training) are refused; names in them that match no
file are listed in the report.

Output (kind ``speech-clips``): ``train/``, ``validation/``, ``test/`` Parquet (index, label, word, speaker, path,
audio = 16,000 int16 samples) and, for the 12-class task, ``test_non_keywords/`` (every non-keyword clip of the
test speakers, for the keyword false-accept rate), ``test_open_set/`` and ``validation_open_set/`` (the test and
validation speakers' clips of the open-set words, never trained on); ``noise/`` (the background recordings, for
augmentation), the report, and a manifest with counts per class, split and voice family.

Voice families (engine + base voice, e.g. ``pico/en-GB``) come from a synthetic corpus' manifest; with
``held_out_families`` every speaker of those families goes to test only, so the test split measures voices whose
kind the model never heard. A split may be empty (an evaluation-only corpus has no training clips); the steps that
need one refuse it by name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from training import local_files, storage
from training.contract import INGEST_REPORT_FILE
from training.datasets import download
from training.speech import speech_commands as layout
from training.speech.constants import KEYWORD_CLIPS_LAYOUT, SPEECH_CLIPS, SPEECH_UNKNOWN_PERCENTAGE

log = logging.getLogger(__name__)

DATASET_KIND = SPEECH_CLIPS
CLIP_SAMPLES = layout.SAMPLE_RATE  # 1 s
SPLITS = {"training": "train", "validation": "validation", "testing": "test"}
LIST_FILES = {"validation": "validation_list.txt", "testing": "testing_list.txt"}
# v0.02's lists are ~10,000 names (~300 KB) each: a list file this large is not one of them.
MAX_LIST_BYTES = 16 * 2**20
NON_KEYWORD_TEST_SPLIT = "test_non_keywords"  # 12-class task: the test speakers' clips of the trained non-keywords
OPEN_SET_TEST_SPLIT = "test_open_set"  # 12-class task: the test speakers' clips of OPEN_SET_WORDS, never trained on
# ... and the validation speakers' clips of them: what a keyword threshold is chosen on (never the test split's)
OPEN_SET_VALIDATION_SPLIT = "validation_open_set"
SILENCE_PERCENTAGE = 10.0
UNKNOWN_PERCENTAGE = SPEECH_UNKNOWN_PERCENTAGE
DOWNLOAD_TIMEOUT_SECONDS = 600
REPORT_NAME = INGEST_REPORT_FILE
LAYOUT_VERSION = KEYWORD_CLIPS_LAYOUT
ROWS_PER_FILE = 8192  # 256 MiB of audio per part file at most
# Rates ``resample`` takes: telephone speech up to studio rates; beyond, a clip is more likely broken than exotic.
MIN_RESAMPLE_RATE = 4_000
MAX_RESAMPLE_RATE = 192_000

def clip_schema(num_classes: int | None = None) -> pa.Schema:
    """The clips' columns; the label is int8 up to 128 classes, int16 beyond (speakers as labels)."""
    from training.datasets.image_records import label_type

    return pa.schema([
        pa.field("index", pa.int64(), nullable=False),
        pa.field("label", label_type(num_classes), nullable=False),
        pa.field("word", pa.string(), nullable=False),
        pa.field("speaker", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("audio", pa.binary(), nullable=False),
    ])


CLIP_SCHEMA = clip_schema()
NOISE_SCHEMA = pa.schema([pa.field("name", pa.string(), nullable=False),
                          pa.field("audio", pa.binary(), nullable=False)])


def class_names(task: int, words: list[str]) -> list[str]:
    """The label set: 12 → silence, unknown, the ten keywords; 35 → every word found, sorted."""
    if task == 12:
        return [layout.SILENCE, layout.UNKNOWN, *layout.KEYWORDS]
    if task == 35:
        return sorted(words)
    raise ValueError(f"task must be 12 or 35, got {task}")


# --- Reading clips -------------------------------------------------------------------------------------------


def decode_pcm(data: bytes, resample: bool) -> tuple[np.ndarray, bool]:
    """Checked 16-bit mono PCM → int16 samples at 16 kHz; (samples, resampled). Raises InvalidClipError."""
    clip = layout.check_clip(data, expected_rate=None if resample else layout.SAMPLE_RATE)
    if clip.sample_rate == layout.SAMPLE_RATE:
        return clip.samples, False
    if not MIN_RESAMPLE_RATE <= clip.sample_rate <= MAX_RESAMPLE_RATE:
        raise layout.InvalidClipError(f"sample rate {clip.sample_rate} Hz, outside the {MIN_RESAMPLE_RATE}–"
                                      f"{MAX_RESAMPLE_RATE} Hz that are resampled")
    return resample_to_16k(clip.samples, clip.sample_rate), True


def resample_to_16k(samples: np.ndarray, rate: int) -> np.ndarray:
    """Polyphase resampling (anti-aliased) to 16 kHz."""
    from scipy.signal import resample_poly

    divisor = math.gcd(layout.SAMPLE_RATE, rate)
    resampled = resample_poly(samples.astype(np.float32), layout.SAMPLE_RATE // divisor, rate // divisor)
    return np.clip(np.round(resampled), -32768, 32767).astype(np.int16)


def fit_to_clip(samples: np.ndarray) -> np.ndarray:
    """Pad with silence or cut to exactly 1 s, as Speech Commands' own loader does."""
    clip = np.zeros(CLIP_SAMPLES, np.int16)
    clip[: min(len(samples), CLIP_SAMPLES)] = samples[:CLIP_SAMPLES]
    return clip


# --- Fetching the source -------------------------------------------------------------------------------------


def open_source(source: str, expected_sha256: str, workdir: Path,
                limits: layout.ArchiveLimits) -> tuple[Path, str, list[dict[str, str]]]:
    """A local directory holding the corpus; (directory, description, archive members skipped with reasons).

    An archive (local, or downloaded into ``workdir``) is checked against ``expected_sha256``, verified whole and
    extracted within ``limits``; a download may be no larger than the extracted total allowed.
    """
    if source.startswith(("http://", "https://")):
        archive = workdir / "download"
        with archive.open("wb") as out:
            download.download(source, out, max_bytes=limits.total_bytes, timeout_seconds=DOWNLOAD_TIMEOUT_SECONDS,
                              expected_sha256=expected_sha256)
    elif source.startswith("hdfs://"):
        copied = _copy_from_hdfs(source, workdir / "from-hdfs", limits)
        if copied.is_dir():
            if expected_sha256:
                raise storage.DatasetError(f"{source}: data_sha256 applies to an archive, not a directory")
            return copied, source, []
        archive = copied
        if expected_sha256:
            download.verify_file(archive, source, expected_sha256)
    else:
        archive = Path(source).expanduser()
        if archive.is_dir():
            if expected_sha256:
                raise storage.DatasetError(f"{source}: data_sha256 applies to an archive, not a directory")
            return archive, str(archive.resolve()), []
        if not os.path.lexists(archive):
            raise storage.DatasetError(f"{source}: no such directory or archive")
        _require_regular_archive(archive)
        if expected_sha256:
            download.verify_file(archive, source, expected_sha256)
    target = workdir / "extracted"
    extraction = layout.safe_extract(archive, target, limits, name=source)
    skipped = extraction.skipped
    # Speech Commands archives hold the words at the top; tolerate one wrapping directory.
    entries = [entry for entry in target.iterdir() if not entry.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and _word_directories(entries[0]):
        prefix = f"{layout.printable(entries[0].name)}/"
        skipped = [{**entry, "path": entry["path"].removeprefix(prefix)} for entry in skipped]
        target = entries[0]
    return target, source, skipped


def _require_regular_archive(archive: Path) -> None:
    """Refuse a FIFO (which would block the read for good), a device or a socket given as the archive."""
    try:
        local_files.require_regular_file(archive)
    except local_files.UnreadableFileError as error:
        raise storage.DatasetError(f"{error}; data_source must be a corpus directory or a .tar/.tar.gz "
                                   "archive") from None


def _copy_from_hdfs(source: str, target: Path, limits: layout.ArchiveLimits) -> Path:
    """A landing zone on HDFS (a corpus directory or an archive) copied to local disk over WebHDFS, within the
    archive limits (checked from HDFS's listing before a byte is copied): the TTS-free ingestion reads local files.
    Only regular files are copied, and only names that stay below the source (no '..', no absolute paths)."""
    where = storage.resolve(source)
    root = where.path.rstrip("/") or "/"
    if not where.fs.exists(root):
        raise storage.DatasetError(f"{source}: no such file or directory on HDFS")
    if where.fs.isfile(root):
        size = where.fs.size(root)
        if size > limits.total_bytes:
            raise storage.DatasetError(f"{source}: {size} bytes, more than archive_max_total_mb allows")
        target.parent.mkdir(parents=True, exist_ok=True)
        archive = target.with_name(target.name + "-archive")
        where.fs.get(root, str(archive))
        return archive
    files = where.fs.find(root, detail=True)
    entries = [(path, info) for path, info in files.items() if info.get("type") == "file"]
    if len(entries) > limits.members:
        raise storage.DatasetError(f"{source}: {len(entries)} files on HDFS, more than archive_max_members "
                                   f"({limits.members}) allows")
    total = sum(int(info.get("size") or 0) for _, info in entries)
    if total > limits.total_bytes:
        raise storage.DatasetError(f"{source}: {total} bytes on HDFS, more than archive_max_total_mb allows")
    for path, info in entries:
        relative = path[len(root):].lstrip("/")
        parts = Path(relative).parts
        if not relative or any(part in ("", ".", "..") for part in parts):
            raise storage.DatasetError(f"{source}: refusing the file name {relative!r}")
        if int(info.get("size") or 0) > limits.member_bytes:
            raise storage.DatasetError(f"{source}/{relative}: larger than archive_max_member_mb allows")
        local = target.joinpath(*parts)
        local.parent.mkdir(parents=True, exist_ok=True)
        where.fs.get_file(path, str(local))
    target.mkdir(parents=True, exist_ok=True)
    log.info("copied %d files (%d bytes) from %s", len(entries), total, source)
    return target


def _word_directories(root: Path) -> list[Path]:
    return sorted(entry for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith(("_", ".")))


# --- Scanning ------------------------------------------------------------------------------------------------


@dataclass
class Scan:
    """Everything read from a corpus directory: good clips by word, noises, skipped files with reasons."""

    clips: dict[str, list[tuple[str, np.ndarray]]] = field(default_factory=dict)  # word → [(relative path, pcm)]
    noises: list[tuple[str, np.ndarray]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    resampled: list[str] = field(default_factory=list)
    trimmed: list[dict[str, Any]] = field(default_factory=list)  # clips longer than 1 s: path and length before
    content: Any = field(default_factory=hashlib.sha256)  # content id of every file read, for the recipe
    split_lists: dict[str, set[str]] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)  # speaker → voice family (synthetic corpora only)


def scan_corpus(root: Path, resample: bool, skipped: list[dict[str, str]] | None = None, source: str = "",
                max_file_bytes: int = layout.MAX_MEMBER_BYTES) -> Scan:
    """Read and check every clip and noise file below ``root`` (``source`` names it in errors); ``skipped`` lists
    files already left out. Only regular files of at most ``max_file_bytes`` are read: others are skipped, with
    the reason, unopened (a FIFO would block the read for good, a link to a device read without end)."""
    words = _word_directories(root)
    if not words:
        also = f" ({len(skipped)} archive members skipped for their names)" if skipped else ""
        raise storage.DatasetError(f"{source or root}: no word directories: not a Speech Commands corpus{also}")
    scan = Scan()
    for entry in skipped or []:
        _skip_unread(scan, entry["path"], entry["reason"])
    _read_split_lists(root, source or str(root), scan)
    scan.families = _voice_families(root, max_file_bytes)
    if scan.families:
        scan.content.update(json.dumps(scan.families, sort_keys=True).encode())
    for directory in words:
        if not layout.is_utf8(directory.name):
            _skip_unread(scan, f"{layout.printable(directory.name)}/", "directory name is not valid UTF-8 (not read)")
            continue
        scan.clips[directory.name] = _scan_word(directory, resample, scan, max_file_bytes)
    noise_dir = root / layout.BACKGROUND_NOISE
    if noise_dir.is_dir():
        _scan_noises(noise_dir, resample, scan, max_file_bytes)
    return scan


def _scan_word(directory: Path, resample: bool, scan: Scan, max_file_bytes: int) -> list[tuple[str, np.ndarray]]:
    """The good clips of one word directory, each fitted to 1 s; the others skipped with their reasons."""
    good: list[tuple[str, np.ndarray]] = []
    for path in sorted(directory.iterdir()):
        relative = f"{directory.name}/{path.name}"
        if not layout.is_utf8(path.name):
            _skip_unread(scan, layout.printable(relative), "file name is not valid UTF-8")
            continue
        samples = _read_checked(path, relative, resample, scan, max_file_bytes)
        if samples is not None:
            good.append((relative, _fit_noting_trims(samples, relative, scan)))
    return good


def _scan_noises(noise_dir: Path, resample: bool, scan: Scan, max_file_bytes: int) -> None:
    """The background recordings (``*.wav``) of at least 1 s; the others skipped with their reasons."""
    for path in sorted(noise_dir.glob("*.wav")):
        relative = f"{layout.BACKGROUND_NOISE}/{path.name}"
        if not layout.is_utf8(path.name):
            _skip_unread(scan, layout.printable(relative), "file name is not valid UTF-8")
            continue
        samples = _read_checked(path, relative, resample, scan, max_file_bytes)
        if samples is None:
            continue
        if len(samples) < CLIP_SAMPLES:
            scan.skipped.append({"path": relative, "reason": "background noise shorter than 1 s"})
            continue
        scan.noises.append((path.name, samples))


def _read_split_lists(root: Path, source: str, scan: Scan) -> None:
    """The clip paths validation_list.txt and testing_list.txt name, where the corpus has them (a list that is
    there but cannot be read is refused: ignoring it would put its clips in training)."""
    for split, list_name in LIST_FILES.items():
        list_file = root / list_name
        if os.path.lexists(list_file):
            text = _text_of(list_file, f"{source}: {list_name}")
            scan.content.update(f"{list_name}\0".encode() + text.encode())
            scan.split_lists[split] = {line.strip() for line in text.splitlines() if line.strip()}


def _voice_families(root: Path, max_file_bytes: int) -> dict[str, str]:
    """Speaker → voice family, from a synthetic corpus' manifest; {} for a corpus without one (real speech)."""
    from training.speech.synthesis import corpus as synthetic_corpus

    manifest_file = root / storage.MANIFEST_NAME
    if not os.path.lexists(manifest_file):
        return {}
    try:
        manifest = json.loads(local_files.read_regular_file(manifest_file, max_file_bytes, "manifest"))
    except ValueError as error:  # not a regular file, or not JSON: a stray file, not one of our corpora
        log.warning("%s: ignoring %s (%s)", root, storage.MANIFEST_NAME, _reason(error, manifest_file))
        return {}
    if not isinstance(manifest, dict) or manifest.get("kind") != synthetic_corpus.DATASET_KIND:
        return {}
    try:
        families = synthetic_corpus.speaker_families(manifest)
    except (KeyError, TypeError, AttributeError) as error:
        raise storage.DatasetError(f"{root}: its {storage.MANIFEST_NAME} lists speaker voices without a speaker or "
                                   f"family ({type(error).__name__}: {error})") from None
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in families.items()):
        raise storage.DatasetError(f"{root}: its {storage.MANIFEST_NAME} has speaker families that are not text")
    return families


def _skip_unread(scan: Scan, path: str, reason: str) -> None:
    """List a file skipped without reading it; the listing counts in the content id instead of its bytes."""
    scan.skipped.append({"path": path, "reason": reason})
    scan.content.update(f"skipped\0{path}\0{reason}\0".encode())


def _text_of(path: Path, shown: str) -> str:
    """A list file's text: a regular file of at most MAX_LIST_BYTES, UTF-8 (a byte-order mark is dropped)."""
    try:
        return local_files.read_regular_file(path, MAX_LIST_BYTES, "list file").decode("utf-8-sig")
    except local_files.UnreadableFileError as error:
        raise storage.DatasetError(f"{shown}: {_reason(error, path)}") from None
    except UnicodeDecodeError as error:
        raise storage.DatasetError(f"{shown} is not UTF-8 text (byte {error.start}: {error.reason}); it must list "
                                   f"one clip path per line") from error


def _reason(error: Exception, path: Path) -> str:
    """An error's message without the path it starts with (a temporary one, for an archive's files)."""
    return str(error).removeprefix(f"{path}: ")


def _fit_noting_trims(samples: np.ndarray, relative: str, scan: Scan) -> np.ndarray:
    if len(samples) > CLIP_SAMPLES:
        scan.trimmed.append({"path": relative, "samples": len(samples),
                             "seconds": round(len(samples) / layout.SAMPLE_RATE, 3)})
    return fit_to_clip(samples)


def _read_checked(path: Path, relative: str, resample: bool, scan: Scan, max_bytes: int) -> np.ndarray | None:
    """A file's samples at 16 kHz, or None after recording why it was skipped; every file read counts in the
    content id."""
    try:
        data = local_files.read_regular_file(path, max_bytes, "WAV file")
    except local_files.UnreadableFileError as error:
        _skip_unread(scan, relative, _reason(error, path))
        return None
    scan.content.update(relative.encode() + b"\0" + hashlib.sha256(data).digest())
    try:
        samples, was_resampled = decode_pcm(data, resample)
    except layout.InvalidClipError as error:
        scan.skipped.append({"path": relative, "reason": str(error)})
        return None
    if was_resampled:
        scan.resampled.append(relative)
    return samples


def refuse_split_speakers(scan: Scan, source: str) -> None:
    """Every speaker's clips in one list, or in none (training): lists that split a speaker would test the model
    on a voice it trained on. Speech Commands' own lists never do (they follow the sha1 rule on the speaker)."""
    if not scan.split_lists:
        return
    unlisted = "no list"
    places = [*LIST_FILES.values(), unlisted]
    where: dict[str, dict[str, str]] = {}  # speaker → place → the first of their clips there
    for clips in scan.clips.values():
        for relative, _ in clips:
            listed_in = [LIST_FILES[split] for split, names in scan.split_lists.items() if relative in names]
            for place in listed_in or [unlisted]:
                where.setdefault(layout.speaker_of(relative), {}).setdefault(place, relative)
    split_speakers = sorted(speaker for speaker, found in where.items() if len(found) > 1)
    if split_speakers:
        speaker = split_speakers[0]
        found = sorted(where[speaker].items(), key=lambda item: places.index(item[0]))
        clips_in = " and ".join(f"clips in {place} ({layout.printable(example)})" for place, example in found)
        more = f" ({len(split_speakers) - 1} more speakers are split too)" if len(split_speakers) > 1 else ""
        raise storage.DatasetError(f"{source}: speaker {layout.printable(speaker)!r} has {clips_in}{more}; a "
                                   "speaker's clips must all be in one list, or all in none (training): fix the "
                                   "lists")


def unmatched_list_names(scan: Scan) -> dict[str, list[str]]:
    """List file → the names in it that are no file of the corpus (a typo, or a list made for another corpus)."""
    present = {relative for clips in scan.clips.values() for relative, _ in clips}
    present.update(entry["path"] for entry in scan.skipped)
    unmatched = {LIST_FILES[split]: sorted(names - present) for split, names in scan.split_lists.items()}
    return {list_name: names for list_name, names in unmatched.items() if names}


def _warn_of_unmatched(unmatched: dict[str, list[str]], source: str) -> None:
    for list_name, names in unmatched.items():
        log.warning("%s: %d name%s in %s match%s no clip of the corpus (first: %s); all are listed in %s", source,
                    len(names), "" if len(names) == 1 else "s", list_name, "es" if len(names) == 1 else "",
                    layout.printable(names[0]), REPORT_NAME)


def split_of(relative: str, split_lists: dict[str, set[str]], held_out_speakers: frozenset[str] = frozenset()) -> str:
    """'training', 'validation' or 'testing': 'testing' for a speaker of a held-out voice family, else from the
    lists when the corpus has them, else the sha1 rule."""
    if layout.speaker_of(relative) in held_out_speakers:
        return "testing"
    if split_lists:
        for split, names in split_lists.items():
            if relative in names:
                return split
        return "training"
    return layout.which_set(relative)


# --- Labelling -----------------------------------------------------------------------------------------------


@dataclass
class SplitRows:
    labels: list[int] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    speakers: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    audio: list[np.ndarray] = field(default_factory=list)

    def add(self, label: int, word: str, speaker: str, path: str, clip: np.ndarray) -> None:
        self.labels.append(label)
        self.words.append(word)
        self.speakers.append(speaker)
        self.paths.append(path)
        self.audio.append(clip)


TRAINING_SPEAKER_RULES = ("all", "sv_train")


def _trains_speaker_verification(speaker: str) -> bool:
    from training.speech.trials import speaker_set

    return speaker_set(speaker) == "sv_train"


def label_clips(scan: Scan, task: int, seed: int, held_out_families: tuple[str, ...] = (),
                train_unknown_percentage: float = UNKNOWN_PERCENTAGE, training_speakers: str = "all"
                ) -> tuple[list[str], dict[str, SplitRows]]:
    """(class names, split → rows) for the keyword task; the sampling of unknown and silence is seeded.

    ``_unknown_`` takes 10 % of a split's keyword-clip count (or every non-keyword clip, if fewer), as TensorFlow's
    tutorial does, dealt evenly over the non-keyword words; the training split takes ``train_unknown_percentage`` %
    instead, so validation and test stay comparable between runs that train with other shares.

    Speakers of ``held_out_families`` go to test only. ``training_speakers`` 'sv_train' leaves out of the training
    split every clip of a speaker whom speaker verification does not train on (training.speech.trials
    .speaker_set), so a keyword spotter trained on it never heard a speaker-verification trial speaker. For the
    12-class task, the words of ``layout.OPEN_SET_WORDS`` are in no split (not even as ``_unknown_``): the test
    speakers' clips of them are ``test_open_set`` (the validation speakers' ``validation_open_set``, on which the
    keyword threshold is chosen), and ``test_non_keywords`` holds every other non-keyword clip of the test speakers
    (all labelled ``_unknown_``). False accepts are measured on all of them (open set: words the
    model never heard; closed set: words it learned to reject), not only on the ones sampled into test.
    """
    names = class_names(task, list(scan.clips))
    label_of = {name: index for index, name in enumerate(names)}
    held_out_speakers = frozenset(speaker for speaker, family in scan.families.items()
                                  if is_held_out(family, held_out_families))
    by_split: dict[str, dict[str, list[tuple[str, np.ndarray]]]] = {split: {} for split in SPLITS}
    if training_speakers not in TRAINING_SPEAKER_RULES:
        raise ValueError(f"training_speakers must be one of {', '.join(TRAINING_SPEAKER_RULES)}, got "
                         f"{training_speakers!r}")
    for word, clips in scan.clips.items():
        for relative, clip in clips:
            split = split_of(relative, scan.split_lists, held_out_speakers)
            if split == "training" and training_speakers == "sv_train" and not _trains_speaker_verification(
                    layout.speaker_of(relative)):
                continue
            by_split[split].setdefault(word, []).append((relative, clip))
    rows = {SPLITS[split]: SplitRows() for split in SPLITS}
    if task == 12:
        rows[NON_KEYWORD_TEST_SPLIT] = SplitRows()
        rows[OPEN_SET_TEST_SPLIT] = SplitRows()
        rows[OPEN_SET_VALIDATION_SPLIT] = SplitRows()
    for split_number, (split, words) in enumerate(by_split.items()):
        out = rows[SPLITS[split]]
        rng = np.random.default_rng([seed, split_number])
        keyword_count = 0
        others: dict[str, list[tuple[str, np.ndarray]]] = {}
        for word in sorted(words):
            for relative, clip in words[word]:
                if word in label_of and word not in (layout.SILENCE, layout.UNKNOWN):
                    out.add(label_of[word], word, layout.speaker_of(relative), relative, clip)
                    keyword_count += 1
                else:
                    others.setdefault(word, []).append((relative, clip))
        if task != 12:
            continue
        open_set = {word: others.pop(word) for word in sorted(others) if word in layout.OPEN_SET_WORDS}
        kept_whole = {"testing": ((NON_KEYWORD_TEST_SPLIT, others), (OPEN_SET_TEST_SPLIT, open_set)),
                      "validation": ((OPEN_SET_VALIDATION_SPLIT, open_set),)}.get(split, ())
        if kept_whole:
            for split_name, clips_by_word in kept_whole:
                for word in sorted(clips_by_word):
                    for relative, clip in clips_by_word[word]:
                        rows[split_name].add(label_of[layout.UNKNOWN], word, layout.speaker_of(relative), relative,
                                             clip)
        share = train_unknown_percentage if split == "training" else UNKNOWN_PERCENTAGE
        unknown_count = math.ceil(keyword_count * share / 100)
        for word, relative, clip in _sample_evenly_by_word(others, unknown_count, rng):
            out.add(label_of[layout.UNKNOWN], word, layout.speaker_of(relative), relative, clip)
        silence_count = math.ceil(keyword_count * SILENCE_PERCENTAGE / 100)
        for number in range(silence_count):
            name, clip = _silence_clip(scan.noises, rng)
            out.add(label_of[layout.SILENCE], layout.SILENCE, layout.SILENCE, f"{name}#{split}-{number}", clip)
    return names, rows


def _sample_evenly_by_word(clips_by_word: dict[str, list[tuple[str, np.ndarray]]], count: int,
                           rng: np.random.Generator) -> list[tuple[str, str, np.ndarray]]:
    """``count`` clips (or all there are) dealt round-robin over the words, each word's clips in a seeded random
    order: every non-keyword word gets an equal share of ``_unknown_``, whatever how many clips it has (a plain
    random draw under-represents the rarer words, which are then accepted as keywords)."""
    queues = [[(word, *clips_by_word[word][position]) for position in rng.permutation(len(clips_by_word[word]))]
              for word in sorted(clips_by_word)]
    chosen: list[tuple[str, str, np.ndarray]] = []
    for position in range(max((len(queue) for queue in queues), default=0)):
        for queue in queues:
            if position < len(queue) and len(chosen) < count:
                chosen.append(queue[position])
    return chosen


def _silence_clip(noises: list[tuple[str, np.ndarray]], rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """1 s of background noise at a random volume (as TensorFlow's Speech Commands input pipeline makes it)."""
    if not noises:
        return "zeros", np.zeros(CLIP_SAMPLES, np.int16)
    name, noise = noises[int(rng.integers(len(noises)))]
    start = int(rng.integers(0, len(noise) - CLIP_SAMPLES + 1))
    volume = float(rng.uniform(0.0, 1.0))
    segment = noise[start : start + CLIP_SAMPLES].astype(np.float32) * volume
    return f"{layout.BACKGROUND_NOISE}/{name}@{start}", np.round(segment).astype(np.int16)


# --- Publishing ----------------------------------------------------------------------------------------------


def _clip_table(rows: SplitRows, start: int, stop: int, num_classes: int | None = None,
                indices: list[int] | None = None) -> pa.Table:
    """Rows ``start:stop`` of a split; ``indices`` numbers them (default: their position in the split)."""
    from training.datasets.image_records import binary_column, label_type

    chunk = rows.audio[start:stop]
    audio = np.stack(chunk) if chunk else np.empty((0, CLIP_SAMPLES), np.int16)
    index = np.arange(start, start + len(chunk)) if indices is None else np.asarray(indices[start:stop], np.int64)
    return pa.Table.from_arrays(
        [pa.array(index, pa.int64()), pa.array(rows.labels[start:stop], label_type(num_classes)),
         pa.array(rows.words[start:stop], pa.string()), pa.array(rows.speakers[start:stop], pa.string()),
         pa.array(rows.paths[start:stop], pa.string()),
         binary_column(audio.astype("<i2").reshape(len(audio), 1, CLIP_SAMPLES))],
        schema=clip_schema(num_classes),
    )


def ingest(
    source: str,
    destination: str,
    task: int = 12,
    resample: bool = False,
    seed: int = 0,
    expected_sha256: str = "",
    overwrite: bool = False,
    held_out_families: tuple[str, ...] = (),
    *,
    train_unknown_percentage: float = UNKNOWN_PERCENTAGE,
    training_speakers: str = "all",
    max_member_bytes: int = layout.MAX_MEMBER_BYTES,
    max_extracted_bytes: int = layout.MAX_EXTRACTED_BYTES,
    max_archive_members: int = layout.MAX_ARCHIVE_MEMBERS,
) -> tuple[dict[str, Any], bool]:
    """Check, label and publish a Speech Commands corpus; (manifest, created).

    An archive source may hold no member over ``max_member_bytes``, extract to no more than
    ``max_extracted_bytes`` in all, and hold no more than ``max_archive_members`` members; a file over
    ``max_member_bytes`` in a directory source is skipped (and reported), unread.
    """
    if task not in (12, 35):
        raise ValueError(f"task must be 12 or 35, got {task}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed}")
    if not (math.isfinite(train_unknown_percentage) and 0 <= train_unknown_percentage <= 1000):
        raise ValueError(f"train_unknown_percentage must be in [0, 1000], got {train_unknown_percentage}")
    if training_speakers not in TRAINING_SPEAKER_RULES:  # before the corpus is read
        raise ValueError(f"training_speakers must be one of {', '.join(TRAINING_SPEAKER_RULES)}, got "
                         f"{training_speakers!r}")
    limits = layout.ArchiveLimits(max_member_bytes, max_extracted_bytes, max_archive_members)
    with tempfile.TemporaryDirectory(prefix="cloudburst-speech-") as workdir:
        root, description, skipped = open_source(source, expected_sha256, Path(workdir), limits)
        log.info("reading clips below %s", root)
        scan = scan_corpus(root, resample, skipped, source, max_member_bytes)
    refuse_split_speakers(scan, source)
    unmatched = unmatched_list_names(scan)
    _warn_of_unmatched(unmatched, source)
    held_out_families = tuple(sorted(set(held_out_families)))
    _check_families(held_out_families, scan.families, source)
    names, rows = label_clips(scan, task, seed, held_out_families, train_unknown_percentage, training_speakers)
    empty = [split for split, split_rows in rows.items() if not split_rows.labels]
    if len(empty) == len(rows):
        raise storage.DatasetError(f"{source}: no usable clips ({len(scan.skipped)} files skipped)")
    if empty:  # fine for an evaluation-only corpus (no train) or one without a validation list; the steps that
        # need a split refuse an empty one themselves, naming it
        log.warning("%s: the %s split%s empty", source, " and ".join(empty), " is" if len(empty) == 1 else "s are")
    report = _report(scan, source, names, rows, unmatched)
    recipe = {"source_content": scan.content.hexdigest(), "task": task, "resample": resample, "seed": seed,
              "held_out_families": list(held_out_families), "layout": LAYOUT_VERSION}
    if train_unknown_percentage != UNKNOWN_PERCENTAGE:  # only then: older datasets keep their recipe
        recipe["train_unknown_percentage"] = train_unknown_percentage
    if training_speakers != "all":
        recipe["training_speakers"] = training_speakers

    def write(staging: storage.Location) -> dict[str, Any]:
        write_splits(staging, rows, scan.noises)
        storage.write_json(storage.join(staging.uri, REPORT_NAME), report)
        return {
            "source": description,
            "task": task,
            "class_names": names,
            "sample_rate": layout.SAMPLE_RATE,
            "clip_samples": CLIP_SAMPLES,
            "splits": {split: {"rows": len(split_rows.labels), "speakers": len(set(split_rows.speakers)),
                               "class_histogram": np.bincount(np.asarray(split_rows.labels, np.int64),
                                                              minlength=len(names)).tolist(),
                               "families": dict(sorted(Counter(scan.families[speaker] for speaker
                                                               in split_rows.speakers
                                                               if speaker in scan.families).items()))}
                       for split, split_rows in rows.items()},
            "voice_families": scan.families,
            "held_out_families": list(held_out_families),
            "noise_files": [name for name, _ in scan.noises],
            "skipped": len(scan.skipped),
            "resampled": len(scan.resampled),
            "trimmed": len(scan.trimmed),
        }

    manifest, created = storage.publish(destination, DATASET_KIND, recipe, write, overwrite=overwrite)
    return manifest, created


def write_splits(staging: storage.Location, rows: dict[str, SplitRows], noises: list[tuple[str, np.ndarray]],
                 num_classes: int | None = None, indices: dict[str, list[int]] | None = None) -> None:
    """Each split's clips as Parquet parts (an empty split gets one empty part) and the noise recordings."""
    for split, split_rows in rows.items():
        staging.fs.makedirs(f"{staging.path}/{split}", exist_ok=True)
        log.info("writing %s: %d clips", split, len(split_rows.labels))
        for part, start in enumerate(range(0, max(len(split_rows.labels), 1), ROWS_PER_FILE)):
            table = _clip_table(split_rows, start, start + ROWS_PER_FILE, num_classes,
                                None if indices is None else indices[split])
            with staging.fs.open(f"{staging.path}/{split}/part-{part:05d}.parquet", "wb") as handle:
                pq.write_table(table, handle)
    staging.fs.makedirs(f"{staging.path}/noise", exist_ok=True)
    noise_table = pa.Table.from_arrays(
        [pa.array([name for name, _ in noises], pa.string()),
         pa.array([samples.astype("<i2").tobytes() for _, samples in noises], pa.binary())],
        schema=NOISE_SCHEMA)
    with staging.fs.open(f"{staging.path}/noise/part-00000.parquet", "wb") as handle:
        pq.write_table(noise_table, handle)


def is_held_out(family: str, held_out: tuple[str, ...]) -> bool:
    """An entry names one family (``pico/en-GB``) or every family of an engine (``pico``)."""
    return any(family == entry or family.startswith(f"{entry}/") for entry in held_out)


def _check_families(held_out: tuple[str, ...], families: dict[str, str], source: str) -> None:
    """Held-out families must be families of this corpus (a typo would silently hold nothing out)."""
    if not held_out:
        return
    if not families:
        raise storage.DatasetError(f"{source}: held_out_families needs a corpus that records each speaker's voice "
                                   "family (the synthetic one does); this one does not")
    known = sorted(set(families.values()))
    unknown = [entry for entry in held_out if not any(is_held_out(family, (entry,)) for family in known)]
    if unknown:
        raise storage.DatasetError(f"held_out_families: {', '.join(unknown)} not in this corpus; its families: "
                                   f"{', '.join(known)}")
    if all(is_held_out(family, held_out) for family in known):
        raise storage.DatasetError("held_out_families names every voice family of the corpus: nothing left to "
                                   "train on")


def _report(scan: Scan, source: str, names: list[str], rows: dict[str, SplitRows],
            unmatched: dict[str, list[str]]) -> dict[str, Any]:
    reasons = Counter(entry["reason"] for entry in scan.skipped)
    return {
        "source": source,
        "clips_read": sum(len(clips) for clips in scan.clips.values()),
        "skipped": scan.skipped,
        "skipped_by_reason": dict(sorted(reasons.items())),
        "resampled": scan.resampled,
        "trimmed": scan.trimmed,
        "noise_files": [name for name, _ in scan.noises],
        "class_names": names,
        "rows_per_split": {split: len(split_rows.labels) for split, split_rows in rows.items()},
        "split_rule": "validation_list.txt/testing_list.txt" if scan.split_lists else "sha1 of the speaker id",
        "unmatched_list_names": unmatched,  # list file → names in it that are no file of the corpus
    }


# --- Reading back --------------------------------------------------------------------------------------------


def read_report(dataset: str) -> dict[str, Any] | None:
    return storage.read_json(storage.join(dataset, REPORT_NAME))


def read_clips(dataset: str, split: str) -> tuple[np.ndarray, pa.Table]:
    """(audio (n, 16000) int16, the table's other columns) of one split."""
    from training.datasets.image_records import pixels_of

    table = storage.read_split_table(dataset, DATASET_KIND, split)

    audio = pixels_of(table.column("audio"), (1, CLIP_SAMPLES), "<i2").reshape(-1, CLIP_SAMPLES)
    return audio.astype(np.int16), table.drop(["audio"])


def split_speakers(dataset: str, split: str) -> set[str]:
    """The speakers of one split's clips (the speaker column only: no audio is read)."""
    table = storage.read_split_table(dataset, DATASET_KIND, split, columns=["speaker"])
    return set(table.column("speaker").to_pylist()) - {layout.SILENCE}


def read_noises(dataset: str) -> list[np.ndarray]:
    """The background noise recordings (int16), for augmentation."""
    table = storage.read_published_parquet(dataset, storage.require_manifest(dataset), "noise/part-00000.parquet")
    return [np.frombuffer(value.as_py(), dtype="<i2").astype(np.int16) for value in table.column("audio")]
