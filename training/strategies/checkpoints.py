"""Checkpoints and the final model on storage (local or HDFS), written atomically so a retry can resume."""

from __future__ import annotations

import atexit
import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from training import storage

KEEP_CHECKPOINTS = 2
DIGESTS_FILE = "digests.json"


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


def _digests(local: Path) -> dict[str, str]:
    """Relative path → sha256 of every file of a checkpoint but the digests file itself."""
    return {file.relative_to(local).as_posix(): hashlib.sha256(file.read_bytes()).hexdigest()
            for file in sorted(local.rglob("*")) if file.is_file() and file.name != DIGESTS_FILE}


def _check_digests(local: Path, shown: str) -> None:
    """Restore only what this store wrote: the files and their sha256 as recorded when the checkpoint was saved."""
    try:
        recorded = json.loads((local / DIGESTS_FILE).read_text())
    except (OSError, ValueError):
        raise storage.DatasetError(f"{shown}: no readable {DIGESTS_FILE} (damaged, or written by an older version); "
                                   "delete the run's checkpoints to train from the start") from None
    if recorded != _digests(local):
        raise storage.DatasetError(f"{shown}: its files are not the ones saved (changed since); delete the run's "
                                   "checkpoints to train from the start")


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
            (Path(local) / DIGESTS_FILE).write_text(json.dumps(_digests(Path(local)), sort_keys=True))
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
        _check_digests(local, self._epoch_path(epoch))
        status = checkpoint.read(str(local / "state"))
        if hasattr(status, "expect_partial"):  # a TensorFlow checkpoint: the model may not hold every saved slot
            status.expect_partial()
        return json.loads((local / "history.json").read_text())
