"""Spark job (step ``train``): train a workload with the chosen strategy on its shards, then record the run in
MLflow.

    spark-submit training/jobs/train.py --workload mnist_elastic_cnn --strategy horovod --nodes 1 \\
        --workers-per-node 2 --epochs 4 --run-name my-run

The run keeps its checkpoints, final model and result under <data root>/runs/<workload>/<run name>/: a retried
job resumes from the last checkpoint, and a finished one is not trained again.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from training import machine_speed, sharding, storage, tracking
from training.config import RunSpec, RunSpecError, shard_rows
from training.contract import EVALUATION_SPLITS, INGEST_REPORT_FILE, RESULT_FILE, RUN_SPEC_FILE, VALIDATION_SPLIT
from training.datasets.image_records import require_records
from training.models import model_files
from training.models.precision import check_hardware
from training.strategies import get_strategy
from training.strategies.base import EvaluationSet, TrainingResult
from training.workload_packages import load_function

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SPEC_FILE = RUN_SPEC_FILE


def check_inputs(spec: RunSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate the spec against its datasets before any Spark work; returns (augmented, shards) manifests."""
    spec.validate()
    augmented = require_records(spec.augmented_uri())
    require_evaluation_examples(augmented)
    shards = storage.require_manifest(spec.shards_uri(), sharding.DATASET_KIND)
    spec.validate_shards(shards["num_shards"], shard_rows(shards))
    return augmented, shards


def require_evaluation_examples(manifest: dict[str, Any]) -> None:
    """Training measures accuracy on the validation split as it goes, evaluate on the test split once at the end:
    a dataset without both is refused."""
    for split in EVALUATION_SPLITS:
        if not (manifest["splits"].get(split) or {}).get("rows"):
            raise RunSpecError(f"{manifest['uri']}: the {split} split is empty or missing, so accuracy cannot be "
                               f"measured; give the corpus {split} examples (Speech Commands: its "
                               f"{'validation' if split == VALIDATION_SPLIT else 'testing'}_list.txt, or speakers "
                               f"the split rule puts there; MNIST: ingest it again)")


def _recorded_spec(spec: RunSpec) -> dict[str, Any] | None:
    """The spec recorded in the run directory (None if none yet); a different spec there is refused."""
    recorded = storage.read_json(storage.join(spec.run_uri(), SPEC_FILE))
    spec.refuse_other_run(recorded)
    return recorded


def previous_result(spec: RunSpec, augmented: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The result of a previous attempt of this run, if it finished training; refuses a run directory that belongs
    to a different spec, or (given the training data's manifest) a result trained on other data. Writes nothing."""
    _recorded_spec(spec)
    record = storage.read_json(storage.join(spec.run_uri(), RESULT_FILE))
    if record is not None and augmented is not None:
        refuse_stale_result(spec, record, augmented)
    return record


def refuse_stale_result(spec: RunSpec, record: dict[str, Any], augmented: dict[str, Any]) -> None:
    """A finished run is a no-op only on the data it trained on: the same settings over a rebuilt or renamed dataset
    (a new dataset layout after an upgrade, an ingest with --overwrite) would otherwise report the old figures."""
    trained_on = record.get("data_version")
    if trained_on is not None and trained_on != augmented["data_version"]:
        raise RunSpecError(f"run {spec.run_name} finished on data version {trained_on}, but its training data "
                           f"{augmented['uri']} is now version {augmented['data_version']}: give the run another "
                           f"run_name, or delete {spec.run_uri()} to train it again")


def claim_run_directory(spec: RunSpec) -> dict[str, Any] | None:
    """Record the spec in the run directory, refusing one that belongs to a different spec; returns the result
    of a previous attempt, if it finished training."""
    if _recorded_spec(spec) is None:
        storage.write_json(storage.join(spec.run_uri(), SPEC_FILE), spec.to_mapping())
    return storage.read_json(storage.join(spec.run_uri(), RESULT_FILE))


def train_run(spark: SparkSession, spec: RunSpec) -> dict[str, Any]:
    """Train (or resume, or skip when done) and log to MLflow; returns the run record (result + MLflow run id)."""
    augmented, shards = check_inputs(spec)
    record = claim_run_directory(spec)
    if record is not None:
        refuse_stale_result(spec, record, augmented)
    if record is not None and record.get("mlflow_run_id"):
        tracking.tracked_run(spec, record["mlflow_run_id"])  # a run tracked in another store is refused, not skipped
        log.info("run %s already trained and tracked (MLflow run %s): nothing to do",
                 spec.run_name, record["mlflow_run_id"])
        return record
    if record is None:
        log.info("training %s with %s on %d workers (%s), %d epochs", spec.workload, spec.strategy,
                 spec.total_workers, spec.config, spec.epochs)
        speed_before, started_at = machine_speed.matmul_gflops(), time.time()
        result = get_strategy(spec.strategy).train(
            spec, spec.shards_uri(), EvaluationSet(spec.augmented_uri(), VALIDATION_SPLIT), spec.run_uri(), spark)
        finished_at, speed_after = time.time(), machine_speed.matmul_gflops()
        # Where it ran, as MLflow tags: the master and (on YARN) the application id to find its logs by.
        result.extra.update({"spark_master": spark.sparkContext.master,
                             "spark_application_id": spark.sparkContext.applicationId,
                             "machine_gflops_before": round(speed_before, 1),
                             "machine_gflops_after": round(speed_after, 1)})
        # What a speedup against this run is allowed to divide by (machine_speed): the machine as it trained.
        result.metrics["machine_gflops"] = (speed_before + speed_after) / 2
        record = {"result": result.to_mapping(), "data_version": augmented["data_version"],
                  "model_version": model_files.model_manifest(result.model_uri)["data_version"],
                  "started_at": started_at, "finished_at": finished_at}
        storage.write_json(storage.join(spec.run_uri(), RESULT_FILE), record)
    result = TrainingResult.from_mapping(record["result"])
    shard_manifest = {key: value for key, value in shards.items() if key != "files"}
    artifacts = {"shard_manifest.json": _json_bytes(shard_manifest), "run_spec.json": _json_bytes(spec.to_mapping())}
    ingest_report = storage.read_json(storage.join(spec.raw_uri(), INGEST_REPORT_FILE))
    if ingest_report is not None:  # speech ingestion lists every skipped clip and why
        artifacts[INGEST_REPORT_FILE] = _json_bytes(ingest_report)
    record["mlflow_run_id"] = tracking.log_training(spec, result, record["data_version"], artifacts,
                                                    started_at=record.get("started_at"))
    storage.write_json(storage.join(spec.run_uri(), RESULT_FILE), record)
    final = result.epochs[-1]
    if result.resumed_from_epoch:
        log.info("resumed after epoch %d from the checkpoints of an earlier attempt (%s/checkpoints)",
                 result.resumed_from_epoch, spec.run_uri())
    log.info("trained in %.1f s (training clock %.1f s): val_accuracy %.4f, time to %.1f%%: %s; MLflow run %s",
             result.wall_seconds, result.training_seconds, final["val_accuracy"], 100 * spec.target_accuracy,
             f"{result.time_to_target_seconds:.1f} s" if result.time_to_target_seconds else "not reached",
             record["mlflow_run_id"])
    return record


def _json_bytes(content: dict[str, Any]) -> bytes:
    return json.dumps(content, indent=2, sort_keys=True).encode()


def training_session(spec: RunSpec, master: str | None = None) -> SparkSession:
    """A session with a task slot per worker: in local mode Horovod and Downpour need all workers running at once."""
    from training.jobs.spark_session import spark_session, wait_for_executors

    spark = spark_session("cloudburst-train", master, spec)
    context = spark.sparkContext
    if context.master.startswith("local") and context.defaultParallelism < spec.total_workers:
        log.info("local mode with %d slots for %d workers: restarting Spark as local[%d]",
                 context.defaultParallelism, spec.total_workers, spec.total_workers)
        spark.stop()
        spark = spark_session("cloudburst-train", f"local[{spec.total_workers}]")
    try:
        wait_for_executors(spark, spec)
    except BaseException:
        spark.stop()
        raise
    return spark


def train_and_stop(spec: RunSpec, master: str | None = None) -> dict[str, Any]:
    """Train in a session of its own and stop it: a barrier stage (Horovod on Spark's) can leave a non-daemon timer
    thread in the JVM that keeps spark-submit alive after the Python driver ends, unless the context is stopped."""
    spark = training_session(spec, master)
    try:
        if spec.link_rate:
            from training.jobs.cluster_links import shape_links

            if not spark.sparkContext.master.startswith("yarn"):
                raise RunSpecError(f"link_rate={spec.link_rate!r} shapes the namespace cluster's links, but this run's "
                                   f"Spark master is {spark.sparkContext.master}: run it on the cluster (yarn)")
            shape_links(spec.link_rate)
        return train_run(spark, spec)
    finally:
        spark.stop()


def training_stages(spec: RunSpec) -> list[RunSpec]:
    """The runs the train step trains, in order (the workload's stages, e.g. transfer learning), else the run."""
    if not spec.definition.training_stages:
        return [spec]
    return load_function(spec.definition.training_stages)(spec)


def run_step(spec: RunSpec, master: str | None = None, overwrite: bool = False) -> str:
    """The pipeline step (``overwrite`` does not apply: a run directory is resumed, never replaced). A run of
    several stages trains each as a run of its own; the last one's record becomes the run's."""
    augmented, _ = check_inputs(spec)  # fail before the JVM starts
    stages = training_stages(spec)  # refuses settings it cannot train before any training
    # A finished run (a retried task, the same DAG run again) is settled here: no Spark session, no YARN application.
    # Only read: a run that then fails to get its executors leaves no spec behind to refuse a retry with fewer nodes.
    finished = (previous_result(spec, augmented) or {}).get("mlflow_run_id")
    if finished:
        in_stages = f" in {len(stages)} stages" if len(stages) > 1 else ""
        log.info("run %s already trained%s and tracked (MLflow run %s): nothing to do", spec.run_name, in_stages,
                 finished)
        return spec.run_uri()
    if (master or spec.spark_master or "local").startswith("local"):  # the workers would run on this CPU
        check_hardware(spec.precision)
    if stages == [spec]:
        train_and_stop(spec, master)
        return spec.run_uri()
    claim_run_directory(spec)
    for number, stage in enumerate(stages, 1):
        log.info("stage %d of %d: %s", number, len(stages), stage.run_uri())
        record = train_and_stop(stage, master)
    storage.write_json(storage.join(spec.run_uri(), RESULT_FILE), {**record, "stages": [s.run_uri() for s in stages]})
    return spec.run_uri()


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=True, argv=argv)


if __name__ == "__main__":
    main()
