"""Step ``ingest``: validate the run's raw data and publish it as a dataset (no Spark). What ingestion means is the
workload's own (MNIST IDX files, a Speech Commands corpus synthesised or checked, …); this job calls it.

    python -m training.jobs.ingest --workload mnist_elastic_cnn [--data-source DIR|URL] [--train-limit N]
"""

from __future__ import annotations

import logging

from training.config import RunSpec
from training.contract import INGEST_REPORT_FILE
from training.workload_packages import load_function

log = logging.getLogger(__name__)


def run_step(spec: RunSpec, overwrite: bool = False) -> str:
    """Ingest the run's data source into ``spec.raw_uri()``; returns the published URI."""
    spec.validate_sources()
    manifest, created = load_function(spec.definition.ingest)(spec, overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    order = {"train": 0, "validation": 1, "test": 2}
    splits = sorted(manifest["splits"].items(), key=lambda item: (order.get(item[0], 3), item[0]))
    rows = ", ".join(f"{split} {stats['rows']}" for split, stats in splits)
    skipped = f"; {manifest['skipped']} files skipped — see {INGEST_REPORT_FILE}" if manifest.get("skipped") else ""
    log.info("%s %s (%s rows%s; data_version %s)", verb, manifest["uri"], rows, skipped, manifest["data_version"])
    return manifest["uri"]


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=False, argv=argv)


if __name__ == "__main__":
    main()
