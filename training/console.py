"""Progress output for command-line runs: timestamped log lines on stderr."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

OUR_LOGGERS = ("training", "cloudburst", "__main__")


def configure_logging(verbose: bool = False) -> None:
    """Our progress at INFO; libraries (py4j, Horovod's rendezvous, MLflow …) only from WARNING up."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)


@contextmanager
def step(log: logging.Logger, what: str) -> Iterator[None]:
    """Log the start and the duration of one long step."""
    log.info("%s …", what)
    started = time.perf_counter()
    yield
    log.info("%s done in %.1f s", what, time.perf_counter() - started)
