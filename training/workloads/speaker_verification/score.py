"""Step ``score`` of speaker verification: embeddings of every clip of the corpus with each trained embedding model,
published as Parquet under the run (``<run>/embeddings/<model>``), and each model's own MLflow run completed: its
speaker-classification accuracy on the held-out clips of the training speakers and the embedder itself.

    python -m training.workloads.speaker_verification.score --workload speaker_verification --run-name my-run

A second call finds everything published and logged and does nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from training import storage
from training.config import RunSpec, RunSpecError
from training.contract import EVALUATION_FILE, RESULT_FILE
from training.workloads.speaker_verification import MODEL_FEATURES, SPEAKER_EMBEDDINGS

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

EMBEDDING_SPLITS = ("train", "validation", "test", "sv_dev", "sv_eval")  # every clip, once (train: copy 0)
EMBEDDING_BATCH = 256


def embeddings_uri(spec: RunSpec, model: str) -> str:
    return storage.join(spec.whole_run().run_uri(), "embeddings", model)


def branch_record(spec: RunSpec, model: str) -> dict[str, Any]:
    """The finished training run of one embedding model (its result.json), or a one-line error."""
    branch = spec.whole_run().for_branch(model)
    record = storage.read_json(storage.join(branch.run_uri(), RESULT_FILE))
    if record is None or not record.get("mlflow_run_id"):
        raise RunSpecError(f"run_name={spec.run_name!r}: model {model} has no finished training at "
                           f"{branch.run_uri()}; train it first (train --embedding-model {model} --features "
                           f"{MODEL_FEATURES[model]})")
    return record


def embed_clips(embedder: Any, features_uri: str, clips: int) -> tuple[np.ndarray, np.ndarray]:
    """(embeddings (clips, dim) float32 by clip index, which rows are filled) from a features dataset's splits."""
    from training.datasets import image_records
    from training.strategies.evaluation_clock import model_inputs

    embeddings = np.zeros((clips, embedder.output_shape[-1]), np.float32)
    filled = np.zeros(clips, bool)
    for split in EMBEDDING_SPLITS:
        batch = image_records.read_split(features_uri, split)
        originals = batch.copy == 0
        index = batch.index[originals]
        if len(index) and (index.min() < 0 or index.max() >= clips):
            raise storage.DatasetError(f"{features_uri}: {split} holds clip indices outside the corpus' {clips} clips")
        images = batch.images[originals]
        for start in range(0, len(index), EMBEDDING_BATCH):
            stop = start + EMBEDDING_BATCH
            embeddings[index[start:stop]] = embedder(model_inputs(images[start:stop]), training=False).numpy()
        filled[index] = True
    return embeddings, filled


def embeddings_table(embeddings: np.ndarray, speakers: np.ndarray) -> pa.Table:
    import pyarrow as pa

    dim = embeddings.shape[1]
    values = pa.array(embeddings.astype(np.float32).reshape(-1), pa.float32())
    return pa.Table.from_arrays([pa.array(np.arange(len(embeddings)), pa.int64()),
                                 pa.array(speakers.tolist(), pa.string()),
                                 pa.FixedSizeListArray.from_arrays(values, dim)],
                                names=["index", "speaker", "embedding"])


def read_embeddings(spec: RunSpec, model: str) -> np.ndarray:
    """One model's embeddings of every clip, rows in clip-index order."""

    uri = embeddings_uri(spec, model)
    manifest = storage.require_manifest(uri, SPEAKER_EMBEDDINGS)
    table = storage.read_published_parquet(uri, manifest, "embeddings.parquet")
    values = table.column("embedding").combine_chunks().flatten().to_numpy()
    return values.reshape(len(table), int(manifest["embedding_dim"])).astype(np.float32)


def score_model(spec: RunSpec, model: str) -> dict[str, Any]:
    """Publish one model's embeddings of every clip and complete its MLflow run; returns the embeddings manifest."""
    import pyarrow.parquet as pq

    from training import tracking
    from training.evaluation.classification import accuracy, confusion_matrix
    from training.models.model_files import load_run_model
    from training.strategies.evaluation_clock import model_inputs, predicted_classes
    from training.workload_registry import workload_for
    from training.workloads.speaker_verification.speaker_clips import read_clip_table
    from training.workloads.speaker_verification.speaker_embedding import embedding_model, parameter_count

    branch = spec.whole_run().for_branch(model)
    record = branch_record(spec, model)
    classifier = load_run_model(record)
    embedder = embedding_model(classifier)
    clips, _ = read_clip_table(branch.raw_uri())
    features = storage.require_manifest(branch.augmented_uri())
    recipe = {"model_uri": record["result"]["model_uri"], "mlflow_run_id": record["mlflow_run_id"],
              "features_data_version": features["data_version"]}

    def write(staging: storage.Location) -> dict[str, Any]:
        embeddings, filled = embed_clips(embedder, branch.augmented_uri(), len(clips))
        if not filled.all():
            raise storage.DatasetError(f"{branch.augmented_uri()}: features of {int((~filled).sum())} clips are "
                                       "missing (not made from this clips dataset?)")
        staging.fs.makedirs(staging.path, exist_ok=True)
        with staging.fs.open(f"{staging.path}/embeddings.parquet", "wb") as handle:
            pq.write_table(embeddings_table(embeddings, clips.speaker), handle)
        return {"model": model, "features": branch.features, "clips": len(clips),
                "embedding_dim": int(embeddings.shape[1]), "model_parameters": parameter_count(classifier)}

    manifest, created = storage.publish(embeddings_uri(spec, model), SPEAKER_EMBEDDINGS, recipe, write)
    log.info("%s embeddings of %d clips %s %s", model, manifest["clips"], "published at" if created else
             "already at", manifest["uri"])

    done = storage.join(branch.run_uri(), EVALUATION_FILE)
    if storage.read_json(done) is None:
        workload = workload_for(branch)
        images, labels = workload.load_split(branch.augmented_uri(), "test")
        predictions = predicted_classes(classifier, images)
        metrics = {"test_accuracy": accuracy(confusion_matrix(labels, predictions, workload.num_classes)),
                   "model_parameters": float(manifest["model_parameters"]),
                   "embedding_dim": float(manifest["embedding_dim"]), "training_speakers": float(workload.num_classes)}
        tracking.log_evaluation(branch, record["mlflow_run_id"], metrics, {}, model=embedder,
                                example_inputs=model_inputs(images[:4]).numpy(),
                                training_finished_at=record.get("finished_at"))
        storage.write_json(done, {"mlflow_run_id": record["mlflow_run_id"], "metrics": metrics})
        log.info("%s: speaker-classification accuracy %.2f%% on the training speakers' held-out clips, %s "
                 "parameters; embedder logged to MLflow run %s", model, 100 * metrics["test_accuracy"],
                 f"{manifest['model_parameters']:,}", record["mlflow_run_id"])
    return manifest


def run_step(spec: RunSpec, overwrite: bool = False) -> str:
    """The pipeline step: embeddings of both models (a no-op when published)."""
    from training.jobs.train import claim_run_directory

    whole = spec.whole_run()
    for model in MODEL_FEATURES:
        branch_record(whole, model)  # both trained, before any work
    claim_run_directory(whole)
    for model in MODEL_FEATURES:
        score_model(whole, model)
    return whole.run_uri()


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=False, argv=argv)


if __name__ == "__main__":
    main()
