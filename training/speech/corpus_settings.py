"""What a speech workload's data source is: the corpus settings keyword spotting and speaker verification share
(same corpus, same checks), the name of a source and the held-out voice families. Standard library only (with
training.settings): the workloads' definitions read it in both environments."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from training.settings import DATA, RunSpecError, Setting, shown
from training.speech.constants import SPEECH_GENERATOR_VERSION

if TYPE_CHECKING:
    from training.config import RunSpec

SYNTHETIC_SOURCE = "synthetic"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")

DATA_SHA256 = Setting(
    "data_sha256", str, "", "Source sha256 (optional)",
    "The expected sha256 of a .tar.gz source (path or URL); ingestion refuses anything else.", DATA,
    pattern=r"[0-9a-fA-F]{64}", optional=True,
    pattern_help="must be 64 hexadecimal digits (or empty)", metavar="SHA256", empty_means="not checked")

SPEAKERS = Setting(
    "speakers", int, 200, "Synthetic speakers",
    "With data_source 'synthetic': how many voices to synthesise; Speech Commands' sha1 rule puts about "
    "10 % of them in the test split, unseen in training.", DATA, minimum=1, maximum=2000)

RESAMPLE = Setting(
    "resample", bool, False, "Resample other rates",
    "Resample clips recorded at a rate other than 16 kHz (instead of skipping them and listing them in "
    "the ingest report).", DATA)

ARCHIVE_MAX_MEMBER_MB = Setting(
    "archive_max_member_mb", int, 64, "Archive: largest member (MiB)",
    "An archive source is refused before anything is written if one member is larger (the real Speech "
    "Commands' largest file is ~6 MB).", DATA, minimum=1, maximum=1_048_576)

ARCHIVE_MAX_TOTAL_MB = Setting(
    "archive_max_total_mb", int, 8192, "Archive: largest extracted size (MiB)",
    "An archive (or a download) that would extract to more is refused (Speech Commands v0.02: ~3.3 GB).",
    DATA, minimum=1, maximum=16_777_216)

ARCHIVE_MAX_MEMBERS = Setting(
    "archive_max_members", int, 250_000, "Archive: most members",
    "An archive with more members is refused (Speech Commands v0.02: ~106,000).", DATA, minimum=1,
    maximum=100_000_000)

HELD_OUT_FAMILIES = Setting(
    "held_out_families", str, "", "Held-out voice families",
    "Comma-separated voice families (engine/voice, e.g. 'pico/en-GB', or a whole engine, 'pico') whose "
    "speakers go to the test split only: accuracy on voices of a kind the model never heard, logged per "
    "family (test_accuracy_family_*) and as test_accuracy_held_out_families. The synthetic corpus "
    "records each speaker's family; `cloudburst synth-speech` lists them.", DATA, optional=True,
    pattern=r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)?(,[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)?)*",
    pattern_help="must be comma-separated family names such as espeak-ng/de,pico (no spaces)",
    metavar="FAMILIES", empty_means="none held out")

# Every speech workload's corpus settings, in the order its form shows them.
CORPUS_SETTINGS = (DATA_SHA256, SPEAKERS, RESAMPLE, ARCHIVE_MAX_MEMBER_MB, ARCHIVE_MAX_TOTAL_MB, ARCHIVE_MAX_MEMBERS,
                   HELD_OUT_FAMILIES)


def source_id(spec: RunSpec) -> str:
    """A short name for a speech source: the synthetic corpus' recipe, or a hash of the path or URL."""
    source = spec.resolved_data_source()
    if source == SYNTHETIC_SOURCE:
        return f"synthetic-v{SPEECH_GENERATOR_VERSION}-s{spec.speakers}-seed{spec.seed}"
    return "source-" + hashlib.sha1(source.encode()).hexdigest()[:10]


def held_out_families(spec: RunSpec) -> tuple[str, ...]:
    """The held_out_families setting as a sorted tuple of distinct names."""
    return tuple(sorted({name for name in spec.held_out_families.split(",") if name}))


def check_source(spec: RunSpec) -> None:
    """The data source is 'synthetic', a directory, an archive, a URL or on HDFS; RunSpecError otherwise."""
    source = spec.resolved_data_source()
    # An hdfs:// landing zone may not have landed yet: the DAG's wait_for_raw_data waits for it, ingest checks it.
    if source == SYNTHETIC_SOURCE or source.startswith(("http://", "https://", "hdfs://")) or Path(source).is_dir():
        return
    if not (Path(source).is_file() and source.endswith(ARCHIVE_SUFFIXES)):
        raise RunSpecError(f"data_source={shown(source)}: not 'synthetic', a directory, an existing .tar.gz, an "
                           "http(s) URL or an hdfs:// directory or archive")
