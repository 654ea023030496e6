"""The corpus a speech run reads: its data source as it is, or — for 'synthetic' — the synthetic corpus of its recipe,
synthesised once (deterministic) where its data root keeps corpora. Keyword spotting and speaker verification read
the same corpus for the same recipe."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from training import storage
from training.speech.corpus_settings import SYNTHETIC_SOURCE

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

SYNTHETIC_REPETITIONS = 2  # utterances of each keyword per synthetic speaker


def synthetic_corpus_dir(data_root: str, speakers: int, seed: int) -> Path:
    """Where the synthetic corpus for a data root lives: beside the datasets when they are local files (so tests
    and other roots stay apart), else under the checkout's var/ (the TTS engines write local files)."""
    from training.speech.synthesis.corpus import default_corpus_dir

    default = default_corpus_dir(speakers, SYNTHETIC_REPETITIONS, seed)
    if data_root.startswith("file://"):
        return Path(storage.resolve(data_root).path) / "corpora" / default.name
    return default


def corpus_source(spec: RunSpec) -> str:
    """The run's data source, with 'synthetic' synthesised (once; deterministic) and replaced by its directory."""
    source = spec.resolved_data_source()
    if source != SYNTHETIC_SOURCE:
        return source
    from training.speech.synthesis.corpus import synthesize_corpus

    corpus = synthetic_corpus_dir(spec.resolved_data_root(), spec.speakers, spec.seed)
    report = synthesize_corpus(corpus, speakers=spec.speakers, repetitions=SYNTHETIC_REPETITIONS, seed=spec.seed)
    log.info("synthetic corpus %s: %d utterances of %d speakers", corpus, report["utterances"], report["speakers"])
    return str(corpus)
