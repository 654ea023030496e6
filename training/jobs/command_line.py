"""Every job's command line: the run specification's flags (the same names for every step, generated from the
settings table, --spark-master among them), plus --overwrite. Errors a user can fix
end the job with one line and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from training import storage
from training.config import RunSpec
from training.console import configure_logging
from training.jobs.spark_session import ClusterCapacityError
from training.strategies.base import TrainingInterruptedError

log = logging.getLogger("cloudburst")

# What a user can fix: bad settings (RunSpecError is a ValueError), missing or foreign datasets, bad files.
USER_ERRORS = (storage.DatasetError, ValueError, FileNotFoundError, PermissionError, NotADirectoryError,
               ClusterCapacityError)


# A step's usage line: its settings are too many to list there (its --help lists them by section).
JOB_USAGE = "%(prog)s [-h] [--workload W] [--preset NAME] [--SETTING VALUE ...] [--overwrite]"


def add_job_arguments(parser: argparse.ArgumentParser, spark: bool, workload: str | None = None,
                      step: str | None = None) -> None:
    """The run settings' flags (--help lists those of ``workload`` that ``step`` reads, else every workload's; all
    are accepted) and --overwrite."""
    RunSpec.add_arguments(parser, workload, step)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a different dataset at the step's destination (default: refuse)")


def job_parser(description: str, spark: bool) -> argparse.ArgumentParser:
    # allow_abbrev=False: a prefix must never pass for a flag (--workers for --workers-per-node)
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False, usage=JOB_USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(parser, spark)
    return parser


def run_reporting_errors(action: Callable[[], object]) -> int:
    """Run ``action``; a user error is logged as one line and gives exit status 2. A failed Spark job (its
    executors or HDFS went away, …) is one line too, its root cause, and exit status 1: the JVM has already
    logged the stack traces, and Python's own adds nothing. So is training interrupted from outside (a host lost
    mid-Horovod): what happened and what the checkpoints keep."""
    try:
        action()
    except USER_ERRORS as error:
        log.error("%s", error)
        return 2
    except TrainingInterruptedError as error:
        log.error("%s", error)
        return 1
    except Exception as error:
        cause = spark_root_cause(error)
        if cause is None:
            raise
        log.error("the Spark job failed: %s", cause)
        return 1
    return 0


def spark_root_cause(error: BaseException) -> str | None:
    """The innermost Java exception of a Py4JJavaError (from a Spark action), as Java prints it; else None."""
    java = getattr(error, "java_exception", None)
    if java is None:
        return None
    try:
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        return " ".join(str(cause.toString()).split())
    except Exception:  # the JVM itself is gone: keep Python's traceback
        return None


def job_main(description: str, step: Callable[..., object], spark: bool, argv: list[str] | None = None) -> None:
    """``python -m training.jobs.<step>`` / ``spark-submit training/jobs/<step>.py``: parse, run, exit."""
    args = job_parser(description, spark).parse_args(argv)
    configure_logging()

    def action() -> None:
        spec = RunSpec.from_args(args).validate()
        step(spec, overwrite=args.overwrite)

    sys.exit(run_reporting_errors(action))
