"""Checkpoints and the final model on storage (local or HDFS), written atomically so a retry can resume."""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from training import storage

KEEP_CHECKPOINTS = 2
MODEL_FILE = "model.h5"


def _upload_directory(local: Path, where: storage.Location, target: str) -> None:
    """Copy a local directory's files to ``target`` through a temporary name, then rename: all or nothing."""
    staging = f"{target.rstrip('/')}.tmp"
    if where.fs.exists(staging):
        where.fs.rm(staging, recursive=True)
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        remote = f"{staging}/{file.relative_to(local).as_posix()}"
        where.fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        where.fs.put_file(str(file), remote)
    if where.fs.exists(target):
        where.fs.rm(target, recursive=True)
    where.fs.mv(staging, target, recursive=True)


def _download_directory(where: storage.Location, source: str, local: Path) -> None:
    for remote in where.fs.find(source):
        destination = local / remote[len(source.rstrip("/")) + 1 :]
        destination.parent.mkdir(parents=True, exist_ok=True)
        where.fs.get_file(remote, str(destination))


class CheckpointStore:
    """``<run>/checkpoints/epoch-NNNN/`` holding the state and the history so far.

    The state is anything with ``write(prefix)`` and ``read(prefix)``: a ``tf.train.Checkpoint`` (model and
    optimizer) or the parameter server's shards."""

    def __init__(self, run_uri: str) -> None:
        self.where = storage.resolve(storage.join(run_uri, "checkpoints"))

    def _epoch_path(self, epoch: int) -> str:
        return f"{self.where.path}/epoch-{epoch:04d}"

    def completed_epochs(self) -> list[int]:
        if not self.where.fs.exists(self.where.path):
            return []
        names = [path.rstrip("/").rsplit("/", 1)[1] for path in self.where.fs.ls(self.where.path, detail=False)]
        return sorted(int(match.group(1)) for name in names if (match := re.fullmatch(r"epoch-(\d{4})", name)))

    def latest_epoch(self) -> int:
        """Epochs completed by the newest checkpoint; 0 when there is none."""
        epochs = self.completed_epochs()
        return epochs[-1] if epochs else 0

    def save(self, epoch: int, checkpoint: Any, history: dict[str, Any]) -> None:
        """Write the checkpoint after ``epoch`` completed epochs; keep the newest few."""
        with tempfile.TemporaryDirectory(prefix="cloudburst-ckpt-") as local:
            checkpoint.write(str(Path(local) / "state"))
            (Path(local) / "history.json").write_text(json.dumps(history))
            self.where.fs.makedirs(self.where.path, exist_ok=True)
            _upload_directory(Path(local), self.where, self._epoch_path(epoch))
        for old in self.completed_epochs()[:-KEEP_CHECKPOINTS]:
            self.where.fs.rm(self._epoch_path(old), recursive=True)

    def restore(self, epoch: int, checkpoint: Any) -> dict[str, Any]:
        """Load model and optimizer state into ``checkpoint``; returns the history saved with it."""
        # TensorFlow restores optimizer slots lazily, at the first training step: the files must outlive this call.
        local = Path(tempfile.mkdtemp(prefix="cloudburst-ckpt-"))
        atexit.register(shutil.rmtree, local, ignore_errors=True)
        _download_directory(self.where, self._epoch_path(epoch), local)
        status = checkpoint.read(str(local / "state"))
        if hasattr(status, "expect_partial"):  # a TensorFlow checkpoint: the model may not hold every saved slot
            status.expect_partial()
        return json.loads((local / "history.json").read_text())


def save_model(run_uri: str, model: Any) -> str:
    """Save the trained Keras model (weights and architecture, no optimizer) under ``<run>/model``."""
    where = storage.resolve(run_uri)
    with tempfile.TemporaryDirectory(prefix="cloudburst-model-") as local:
        with warnings.catch_warnings():  # H5 is "legacy" to Keras 2.15 but loads everywhere Keras 2 does
            warnings.simplefilter("ignore", UserWarning)
            model.save(str(Path(local) / MODEL_FILE), include_optimizer=False)
        _upload_directory(Path(local), where, f"{where.path}/model")
    return storage.join(run_uri, "model", MODEL_FILE)


def load_model(model_uri: str) -> Any:
    import tensorflow as tf

    where = storage.resolve(model_uri)
    with tempfile.TemporaryDirectory(prefix="cloudburst-model-") as local:
        target = Path(local) / MODEL_FILE
        where.fs.get_file(where.path, str(target))
        return tf.keras.models.load_model(str(target), compile=False)
