"""Progress output for command-line runs: timestamped log lines on stderr."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("py4j", "urllib3", "fsspec", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@contextmanager
def step(log: logging.Logger, what: str) -> Iterator[None]:
    """Log the start and the duration of one long step."""
    log.info("%s …", what)
    started = time.perf_counter()
    yield
    log.info("%s done in %.1f s", what, time.perf_counter() - started)
