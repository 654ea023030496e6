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
