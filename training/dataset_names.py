"""Default dataset locations, derived from the inputs that make each dataset (standard library only)."""

from __future__ import annotations


def raw_mnist(data_root: str, train_limit: int = 0, test_limit: int = 0) -> str:
    """The ingested MNIST; a slice (first N images) gets its own name."""
    suffix = f"-train{train_limit}-test{test_limit}" if train_limit or test_limit else ""
    return f"{data_root.rstrip('/')}/mnist/raw{suffix}"


def elastic(source: str, copies: int, alpha: float, sigma: float, seed: int) -> str:
    """Beside the source: ``…/raw`` becomes ``…/elastic-k1-a34-s4-seed0``, any other name gets it appended."""
    parent, name = source.rstrip("/").rsplit("/", 1)
    stem = name.replace("raw", "elastic", 1) if name.startswith("raw") else f"{name}-elastic"
    return f"{parent}/{stem}-k{copies}-a{alpha:g}-s{sigma:g}-seed{seed}"


def shards(source: str, num_shards: int, seed: int) -> str:
    return f"{source.rstrip('/')}-shards{num_shards}-seed{seed}"


def speech_clips(data_root: str, source_id: str, task: int, resample: bool) -> str:
    """Ingested Speech Commands clips labelled for one keyword task: ``…/speech_commands/<source>/clips-task12``."""
    suffix = "-resampled" if resample else ""
    return f"{data_root.rstrip('/')}/speech_commands/{source_id}/clips-task{task}{suffix}"


def speech_features(clips: str, kind: str, copies: int, seed: int) -> str:
    """Beside the clips: ``clips-task12`` becomes ``features-task12-log_mel-k2-seed0``."""
    parent, name = clips.rstrip("/").rsplit("/", 1)
    stem = name.replace("clips", "features", 1) if name.startswith("clips") else f"{name}-features"
    return f"{parent}/{stem}-{kind}-k{copies}-seed{seed}"
