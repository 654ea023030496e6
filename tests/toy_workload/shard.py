"""The toy's own Spark step (``shard``), as a workload package owns one: named in its definition's ``step_jobs``, so
the DAG's Spark operator spark-submits this file (and the CLI runs this module) instead of training/jobs/shard.py.
It deals the shards as the generic job does, then refuses shards that miss a blob: every worker must see all three.

    spark-submit tests/toy_workload/shard.py --workload toy_dense --nodes 1 --workers-per-node 2
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from training import storage
from training.jobs import shard

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)


def run_step(spec: RunSpec, master: str | None = None, overwrite: bool = False) -> str:
    uri = shard.run_step(spec, master, overwrite)
    for entry in storage.read_manifest(uri)["shards"]:
        if 0 in entry["class_histogram"]:
            raise RuntimeError(f"{uri}: shard {entry['shard']} misses a blob ({entry['class_histogram']}); "
                               "use fewer workers")
    log.info("toy_dense: every one of the %s shards holds all three blobs", spec.total_workers)
    return uri


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=True, argv=argv)


if __name__ == "__main__":
    main()
