"""The `cloudburst` command's entry point (pyproject.toml): the workload registry is read before training.cli is
imported, because training.config builds its settings table from every registered workload at import. A broken
workload package installed or named by a user is then one line and exit status 2, not a traceback."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("training.cli")


def main(argv: list[str] | None = None) -> int:
    from training.console import configure_logging
    from training.workload_registry import WorkloadRegistrationError, registry

    try:
        registry()
    except WorkloadRegistrationError as error:
        configure_logging()
        log.error("%s", error)
        return 2
    from training.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
