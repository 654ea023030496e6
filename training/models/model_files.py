"""Trained models on storage, and the one loader of the project.

A saved model is a published directory (training.storage: written under a temporary name, manifest last) holding
``weights.npz`` — the weights as plain arrays, in ``model.get_weights()`` order — and, in its manifest, each file's
sha256 and the architecture record (training.models.architecture). Loading checks the digests, rebuilds the model
with this package's own builder and sets the weights after checking their count, shapes and values. No file is
ever unpickled or deserialised into layers, so a model file cannot run code; a Keras ``.h5`` or ``.keras`` file,
which can (a ``Lambda``'s function, a ``TFOpLambda``'s op), is refused by name. The MLflow model logged for each
run is the same directory under MLflow's ``python_function`` flavour, loaded through :func:`_load_pyfunc`.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from training import local_files, storage
from training.models import architecture as architectures

MODEL_KIND = "cloudburst-model"
MODEL_FORMAT = 1
WEIGHTS_FILE = "weights.npz"
RUN_MODEL_DIRECTORY = "model"
MAX_WEIGHTS_BYTES = 2**30  # 1 GiB: the largest model here is a few MB
LEGACY_SUFFIXES = (".h5", ".hdf5", ".keras", ".pb")


class ModelFileError(storage.DatasetError):
    """A model file is missing, damaged, not the one published, or not a Cloudburst model; the message names it."""


# Writing ----------------------------------------------------------------------------------------------------------
def weights_description(model: Any) -> dict[str, Any]:
    """What the manifest says of a model's weights: its architecture record, each array's shape, the count."""
    weights = model.get_weights()
    return {"architecture": architectures.architecture_of(model),
            "weight_shapes": [list(array.shape) for array in weights],
            "parameters": int(sum(array.size for array in weights))}


def write_weights(model: Any, path: Path) -> dict[str, Any]:
    """Write ``model``'s weights to ``path`` (npz, uncompressed, no pickles); returns :func:`weights_description`."""
    description = weights_description(model)
    arrays = {f"w{index:05d}": np.asarray(array) for index, array in enumerate(model.get_weights())}
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
    return description


def save_model(destination: str, model: Any, recipe: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Publish ``model`` as a model directory at ``destination`` (local or HDFS), replacing what was there;
    returns the manifest (its ``data_version`` is the model's content id)."""

    def write(staging: storage.Location) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="cloudburst-model-") as local:
            description = write_weights(model, Path(local) / WEIGHTS_FILE)
            staging.fs.put_file(str(Path(local) / WEIGHTS_FILE), f"{staging.path}/{WEIGHTS_FILE}")
        return {"model_format": MODEL_FORMAT, **description}

    manifest, _ = storage.publish(destination, MODEL_KIND, dict(recipe or {}), write, overwrite=True)
    return manifest


def save_run_model(run_uri: str, model: Any) -> str:
    """Publish a run's final model under ``<run>/model``; returns that directory's URI (the run's model_uri)."""
    destination = storage.join(run_uri, RUN_MODEL_DIRECTORY)
    save_model(destination, model, {"run": run_uri})
    return destination


# Reading ----------------------------------------------------------------------------------------------------------
def read_file(where: storage.Location, path: str, max_bytes: int, what: str) -> bytes:
    """A published file's bytes, bounded: a local one must be a regular file (a FIFO would block)."""
    shown = f"{where.uri.rstrip('/')}/{path.rsplit('/', 1)[-1]}" if path != where.path else where.uri
    if where.uri.startswith("file://"):
        try:
            return local_files.read_regular_file(path, max_bytes, what)
        except local_files.UnreadableFileError as error:
            raise ModelFileError(str(error)) from None
    try:
        if not where.fs.isfile(path):
            raise ModelFileError(f"{shown}: missing")
        if where.fs.size(path) > max_bytes:
            raise ModelFileError(f"{shown}: larger than the {max_bytes:,} bytes a {what} may hold here")
        with where.fs.open(path, "rb") as handle:
            return handle.read(max_bytes + 1)
    except OSError as error:
        raise ModelFileError(f"{shown}: cannot be read ({error})") from None


def check_digest(content: bytes, expected: Any, shown: str) -> None:
    """Refuse bytes whose sha256 is not the one the manifest recorded when they were published."""
    import hashlib

    if not isinstance(expected, str) or hashlib.sha256(content).hexdigest() != expected:
        raise ModelFileError(f"{shown}: its sha256 is not the one recorded when it was published (changed or "
                             "swapped since); publish it again")


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _arrays(content: bytes, shown: str) -> list[np.ndarray]:
    """The arrays of an npz written by :func:`write_weights`, in order; no pickles, no compression bombs."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            members = archive.infolist()
            if any(member.compress_type != zipfile.ZIP_STORED or member.file_size > MAX_WEIGHTS_BYTES
                   for member in members):
                raise ModelFileError(f"{shown}: holds compressed or oversized members; not written by Cloudburst")
            for member in members:  # numpy allocates what a header declares before reading: check it first
                with archive.open(member) as handle:
                    read_header = _HEADER_READERS.get(np.lib.format.read_magic(handle))
                    if read_header is None:
                        raise ModelFileError(f"{shown}: array {member.filename} is in an unknown .npy version")
                    shape, _, dtype = read_header(handle)
                if dtype.hasobject or int(np.prod(shape, dtype=np.int64)) * dtype.itemsize > member.file_size:
                    raise ModelFileError(f"{shown}: array {member.filename} declares more than it holds")
        with np.load(io.BytesIO(content), allow_pickle=False) as saved:
            names = sorted(saved.files)
            if names != [f"w{index:05d}" for index in range(len(names))]:
                raise ModelFileError(f"{shown}: its arrays are not named w00000, w00001, …; not written by "
                                     "Cloudburst")
            return [saved[name] for name in names]
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise ModelFileError(f"{shown}: not a readable weights file ({str(error)[:120]})") from None


def build_model(description: Mapping[str, Any], content: bytes, shown: str) -> Any:
    """The model a weights file and its description stand for: rebuilt by its own builder, weights checked."""
    try:
        model = architectures.rebuild(description.get("architecture"))
    except architectures.ArchitectureError as error:
        raise ModelFileError(f"{shown}: {error}") from None
    arrays = _arrays(content, shown)
    expected = [tuple(weight.shape) for weight in model.weights]
    if [array.shape for array in arrays] != expected:
        raise ModelFileError(f"{shown}: {len(arrays)} arrays that do not fit the {len(expected)} weights of "
                             f"{description['architecture'].get('builder')} as recorded")
    for array in arrays:
        if array.dtype.kind != "f" or not np.isfinite(array).all():
            raise ModelFileError(f"{shown}: holds weights that are not finite numbers")
    model.set_weights(arrays)
    return model


def _refuse_keras_file(model_uri: str) -> None:
    if model_uri.rstrip("/").lower().endswith(LEGACY_SUFFIXES):
        raise ModelFileError(f"{model_uri}: a Keras file is never loaded here — its architecture can carry code "
                             "(Lambda, TFOpLambda); give the model directory a Cloudburst run published "
                             f"({WEIGHTS_FILE} beside its {storage.MANIFEST_NAME}), or retrain the run")


def model_manifest(model_uri: str) -> dict[str, Any]:
    """The manifest of a published model directory; ModelFileError naming what is wrong."""
    _refuse_keras_file(model_uri)
    try:
        manifest = storage.read_manifest(model_uri)
    except storage.DatasetError as error:
        raise ModelFileError(str(error)) from None
    if manifest is None or manifest.get("kind") != MODEL_KIND:
        raise ModelFileError(f"{model_uri}: not a published Cloudburst model (no {storage.MANIFEST_NAME} of kind "
                             f"{MODEL_KIND!r}); was the run trained by an older version? retrain it")
    if type(manifest.get("model_format")) is not int or manifest["model_format"] != MODEL_FORMAT:
        raise ModelFileError(f"{model_uri}: model format {str(manifest.get('model_format'))[:20]!r}, this version "
                             f"reads {MODEL_FORMAT}")
    return manifest


def load_model(model_uri: str, expected_version: str | None = None) -> Any:
    """The model published at ``model_uri`` (a directory written by :func:`save_model`), its files checked against
    their recorded digests — and the whole against ``expected_version`` (the manifest's ``data_version`` that a
    run record kept) when given."""
    manifest, content, shown = verified_weights(model_uri, expected_version)
    return build_model(manifest, content, shown)


def verified_weights(model_uri: str, expected_version: str | None = None) -> tuple[dict[str, Any], bytes, str]:
    """(manifest, weights file bytes, the file's URI) of a published model, checked as :func:`load_model` checks
    them, without building the model."""
    manifest = model_manifest(model_uri)
    if expected_version is not None and manifest.get("data_version") != expected_version:
        raise ModelFileError(f"{model_uri}: holds model version {str(manifest.get('data_version'))[:20]}, not the "
                             f"{expected_version} its run recorded (replaced since); retrain the run")
    files = manifest.get("files")
    if not isinstance(files, Mapping) or set(files) != {WEIGHTS_FILE}:
        raise ModelFileError(f"{model_uri}/{storage.MANIFEST_NAME}: its 'files' must list {WEIGHTS_FILE} alone")
    where = storage.resolve(model_uri)
    shown = storage.join(where.uri, WEIGHTS_FILE)
    content = read_file(where, f"{where.path.rstrip('/')}/{WEIGHTS_FILE}", MAX_WEIGHTS_BYTES, "weights file")
    check_digest(content, files[WEIGHTS_FILE], shown)
    return manifest, content, shown


def load_run_model(record: Mapping[str, Any]) -> Any:
    """The final model of a run from its record (``result.json``): its model directory, checked against the
    version the record kept."""
    result = record.get("result") if isinstance(record, Mapping) else None
    if not isinstance(result, Mapping) or not isinstance(result.get("model_uri"), str):
        raise ModelFileError("the run's result record names no model (model_uri); train the run first")
    return load_model(result["model_uri"], record.get("model_version"))


class _PythonFunction:
    """MLflow's ``python_function`` face of a model: ``predict(inputs)`` → logits."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, model_input: Any, params: Any = None) -> np.ndarray:
        return self.model.predict(np.asarray(model_input, np.float32), verbose=0)


def _load_pyfunc(data_path: str) -> _PythonFunction:
    """MLflow's loader for the models Cloudburst logs (``mlflow.pyfunc.load_model``): the checked loader above."""
    return _PythonFunction(load_model(str(Path(data_path).resolve())))
