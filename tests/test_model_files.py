"""The one model loader: a model file never runs code, and a loaded model is the one that was published.

The hostile files are real: a Keras H5 model whose Lambda writes a marker file when Keras loads it (shown to run
under Keras' own loader), weights swapped between two published models, arrays that lie about their size,
architecture records naming code that is not a builder."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from training import storage  # noqa: E402  (after the TensorFlow skip)
from training.models import architecture, model_files  # noqa: E402
from training.models.model_files import ModelFileError  # noqa: E402
from training.workloads.mnist_elastic_cnn.model import simard_cnn  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:You are saving your model as an HDF5 file:UserWarning")


def hostile_h5(path: Path, marker: Path) -> Path:
    """A legacy H5 full model whose Lambda layer writes ``marker`` whenever the model is built from the file."""
    write_marker = eval(f"lambda x: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), x)[1]")  # noqa: S307
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(tf.keras.layers.Lambda(write_marker)(inputs)))
    marker.unlink(missing_ok=True)  # building it above ran the function once
    model.save(path, save_format="h5")
    return path


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Two published CNNs of the same architecture and different weights."""
    root = tmp_path_factory.mktemp("models")
    tf.keras.utils.set_random_seed(0)
    first = simard_cnn(dense_units=16)
    second = simard_cnn(dense_units=16)
    for name, model in (("first", first), ("second", second)):
        model_files.save_model(str(root / name), model)
    return root, first


def copy_model(published_root: Path, name: str, destination: Path) -> Path:
    import shutil

    shutil.copytree(published_root / name, destination)
    return destination


def test_the_hostile_h5_runs_its_code_under_keras_own_loader(tmp_path):
    """The test's premise: without the project's loader, loading this file runs the attacker's code."""
    marker = tmp_path / "marker"
    path = hostile_h5(tmp_path / "model.h5", marker)
    assert not marker.exists()
    tf.keras.models.load_model(path, compile=False, safe_mode=True)  # safe_mode does not cover H5
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("name", ["model.h5", "embedder-b.keras", "model.keras", "weights.hdf5"])
def test_a_keras_file_is_refused_by_name_and_its_code_never_runs(tmp_path, name):
    marker = tmp_path / "marker"
    path = hostile_h5(tmp_path / name, marker)
    with pytest.raises(ModelFileError, match="never loaded") as refusal:
        model_files.load_model(str(path))
    assert str(path) in str(refusal.value) and len(str(refusal.value).splitlines()) == 1
    assert not marker.exists()


def test_a_hostile_h5_in_place_of_the_weights_is_refused_and_never_runs(published, tmp_path):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    marker = tmp_path / "marker"
    hostile_h5(target / model_files.WEIGHTS_FILE, marker)
    with pytest.raises(ModelFileError, match="sha256"):
        model_files.load_model(str(target))
    # Even with its digest written into the manifest, the file is parsed as plain arrays, never as a model.
    manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
    manifest["files"][model_files.WEIGHTS_FILE] = storage.file_sha256(storage.resolve(str(target)).fs,
                                                                      str(target / model_files.WEIGHTS_FILE))
    (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ModelFileError, match="not a readable weights file"):
        model_files.load_model(str(target))
    assert not marker.exists()


def test_a_model_loads_as_published_and_predicts_the_same(published):
    root, first = published
    images = np.random.default_rng(0).random((3, 28, 28, 1), np.float32)
    loaded = model_files.load_model(str(root / "first"))
    np.testing.assert_allclose(loaded(images, training=False), first(images, training=False), atol=1e-6)


def test_weights_swapped_in_from_another_published_model_are_refused(published, tmp_path):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    (target / model_files.WEIGHTS_FILE).write_bytes((root / "second" / model_files.WEIGHTS_FILE).read_bytes())
    with pytest.raises(ModelFileError, match=r"weights.npz: its sha256 is not the one recorded"):
        model_files.load_model(str(target))


def test_a_whole_model_directory_swapped_for_another_is_refused_against_the_run_record(published):
    root, _ = published
    second_version = json.loads((root / "second" / storage.MANIFEST_NAME).read_text())["data_version"]
    first_version = json.loads((root / "first" / storage.MANIFEST_NAME).read_text())["data_version"]
    record = {"result": {"model_uri": str(root / "second")}, "model_version": first_version}
    with pytest.raises(ModelFileError, match="not the .* its run recorded"):
        model_files.load_run_model(record)
    assert model_files.load_run_model({**record, "model_version": second_version}) is not None


@pytest.mark.parametrize("damage", ["truncated weights", "missing weights", "truncated manifest",
                                    "manifest of a list", "no manifest", "weights a directory", "weights a fifo",
                                    "extra file listed"])
def test_a_damaged_model_is_refused_in_one_line_naming_the_file(published, tmp_path, damage):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    weights, manifest = target / model_files.WEIGHTS_FILE, target / storage.MANIFEST_NAME
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "missing weights":
        weights.unlink()
    elif damage == "truncated manifest":
        manifest.write_text(manifest.read_text()[:145])
    elif damage == "manifest of a list":
        manifest.write_text("[]")
    elif damage == "no manifest":
        manifest.unlink()
    elif damage == "weights a directory":
        weights.unlink()
        weights.mkdir()
    elif damage == "weights a fifo":
        weights.unlink()
        os.mkfifo(weights)
    elif damage == "extra file listed":
        content = json.loads(manifest.read_text())
        content["files"]["other.npz"] = "0" * 64
        manifest.write_text(json.dumps(content))
    with pytest.raises(storage.DatasetError) as refusal:
        model_files.load_model(str(target))
    message = str(refusal.value)
    assert len(message.splitlines()) == 1 and str(target) in message, message


def rewrite_weights(target: Path, arrays: dict[str, np.ndarray], compressed: bool = False,
                    description: dict | None = None) -> None:
    """Replace a model's weights file and record its digest, as an attacker who also rewrites the manifest would."""
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    (target / model_files.WEIGHTS_FILE).write_bytes(buffer.getvalue())
    manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
    manifest["files"][model_files.WEIGHTS_FILE] = __import__("hashlib").sha256(buffer.getvalue()).hexdigest()
    manifest.update(description or {})
    (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))


def original_arrays(root: Path) -> dict[str, np.ndarray]:
    with np.load(root / "first" / model_files.WEIGHTS_FILE) as saved:
        return {name: saved[name] for name in saved.files}


@pytest.mark.parametrize(("change", "reason"), [
    ("object array", "declares more than it holds|not a readable"),
    ("compressed", "compressed or oversized"),
    ("one array short", "do not fit"),
    ("a wrong shape", "do not fit"),
    ("NaN weights", "not finite"),
    ("integer weights", "not finite"),
    ("other names", "not named w00000"),
])
def test_weights_that_do_not_fit_the_rebuilt_model_are_refused(published, tmp_path, change, reason):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    arrays = original_arrays(root)
    if change == "object array":
        buffer = io.BytesIO()
        np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as handle:
            handle.writestr("w00000.npy", buffer.getvalue())
        (target / model_files.WEIGHTS_FILE).write_bytes(archive.getvalue())
        manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
        manifest["files"][model_files.WEIGHTS_FILE] = __import__("hashlib").sha256(archive.getvalue()).hexdigest()
        (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    elif change == "compressed":
        rewrite_weights(target, arrays, compressed=True)
    elif change == "one array short":
        rewrite_weights(target, dict(list(arrays.items())[:-1]))
    elif change == "a wrong shape":
        rewrite_weights(target, {**arrays, "w00000": np.zeros((1, 1), np.float32)})
    elif change == "NaN weights":
        rewrite_weights(target, {**arrays, "w00000": np.full_like(arrays["w00000"], np.nan)})
    elif change == "integer weights":
        rewrite_weights(target, {**arrays, "w00000": arrays["w00000"].astype(np.int32)})
    elif change == "other names":
        rewrite_weights(target, {f"layer{index}": array for index, array in enumerate(arrays.values())})
    with pytest.raises(ModelFileError, match=reason):
        model_files.load_model(str(target))


def test_an_array_header_that_claims_more_than_the_file_holds_is_refused_before_numpy_allocates(published,
                                                                                                  tmp_path):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (10**12,)
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("w00000.npy", buffer.getvalue() + b"\0" * 16)
    rewrite = archive.getvalue()
    (target / model_files.WEIGHTS_FILE).write_bytes(rewrite)
    manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
    manifest["files"][model_files.WEIGHTS_FILE] = __import__("hashlib").sha256(rewrite).hexdigest()
    (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ModelFileError, match="declares more than it holds"):
        model_files.load_model(str(target))


CNN = "training.workloads.mnist_elastic_cnn.model:simard_cnn"


@pytest.mark.parametrize(("architecture", "reason"), [
    ({"builder": "os:system", "arguments": {}}, "not in training.models or a registered workload's package"),
    ({"builder": "builtins:eval", "arguments": {"source": "1"}}, "not in training.models"),
    ({"builder": "training.models.optimizers:make_optimizer", "arguments": {}}, "not a function marked"),
    ({"builder": "training.workloads.mnist_elastic_cnn.model:tf", "arguments": {}}, "not a function marked"),
    ({"builder": "training.modelsx:simard_cnn", "arguments": {}}, "not in training.models"),
    ({"builder": "training.models.no_such_module:f", "arguments": {}}, "not a function marked"),
    ({"builder": CNN, "arguments": {"command": "touch /tmp/x"}}, "cannot be built from the recorded arguments"),
    ({"builder": CNN, "arguments": {}, "part": "os:system"}, "not in training.models"),
    ({"builder": CNN, "arguments": {}, "part": CNN}, "not a function marked as a model part"),
    ({"builder": CNN, "arguments": {"dense_units": {"__class__": "x"}}}, "cannot be recorded"),
    ({"builder": CNN, "arguments": {}, "module": "os"}, "holds 'builder', 'arguments'"),
    ("simard_cnn", "holds 'builder', 'arguments'"),
])
def test_an_architecture_record_names_only_marked_builders_of_installed_code(published, tmp_path, architecture,
                                                                            reason):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
    manifest["architecture"] = architecture
    (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ModelFileError) as refusal:
        model_files.load_model(str(target))
    assert reason in str(refusal.value) and len(str(refusal.value).splitlines()) == 1


@pytest.mark.parametrize("reference", ["training.models.cnn:simard_cnn"])  # the published fixture's builder
def test_a_model_saved_before_its_builder_moved_loads_from_where_it_lives_now(published, tmp_path, reference):
    root, model = published
    target = copy_model(root, "first", tmp_path / "model")
    manifest = json.loads((target / storage.MANIFEST_NAME).read_text())
    assert manifest["architecture"]["builder"] == architecture.MOVED_REFERENCES[reference]
    manifest["architecture"]["builder"] = reference  # as a model saved before the move recorded it
    (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    loaded = model_files.load_model(str(target))
    assert architecture.architecture_of(loaded)["builder"] == architecture.MOVED_REFERENCES[reference]
    for saved, rebuilt in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(saved, rebuilt)


@pytest.mark.parametrize("old", sorted(architecture.MOVED_REFERENCES))
def test_every_moved_reference_names_the_same_marked_function_as_its_new_one(old):
    new = architecture.MOVED_REFERENCES[old]
    mark = architecture.PART_MARK if old.endswith(":embedding_model") else architecture.BUILDER_MARK
    assert old != new and architecture._marked_function(old, mark) is architecture._marked_function(new, mark)


def test_a_model_saved_before_its_builder_moved_loads_with_the_same_weights(tmp_path):
    """A saved model names its builder by module path: one saved under the keyword spotter's old path still loads."""
    from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

    tf.keras.utils.set_random_seed(0)
    model = densenet_bilstm(input_shape=(20, 16), num_classes=3, block_layers=(1,), lstm_units=4)
    model_files.save_model(str(tmp_path / "model"), model)
    manifest = json.loads((tmp_path / "model" / storage.MANIFEST_NAME).read_text())
    assert manifest["architecture"]["builder"] == "training.workloads.kws_densenet_bilstm.model:densenet_bilstm"
    manifest["architecture"]["builder"] = "training.models.densenet_bilstm:densenet_bilstm"  # as saved before
    (tmp_path / "model" / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
    loaded = model_files.load_model(str(tmp_path / "model"))
    for saved, read in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(saved, read)


def test_a_model_built_outside_the_builders_cannot_be_saved(tmp_path):
    from training.models.architecture import ArchitectureError

    inputs = tf.keras.Input((4,))
    with pytest.raises(ArchitectureError, match="not built by a builder marked with"):
        model_files.save_model(str(tmp_path / "model"), tf.keras.Model(inputs, tf.keras.layers.Dense(2)(inputs)))
    assert not (tmp_path / "model").exists()  # nothing half-published


def test_the_logged_mlflow_model_loads_through_the_checked_loader_and_a_tampered_one_is_not_registered(
        published, tmp_path):
    import mlflow

    from training import tracking
    from training.study import record

    _, first = published
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow_client = tracking.client(uri)
    experiment = mlflow_client.create_experiment("models", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = mlflow_client.create_run(experiment).info.run_id
    images = np.random.default_rng(1).random((2, 28, 28, 1), np.float32)
    mlflow.set_tracking_uri(uri)
    try:
        tracking.log_model(run_id, first, images)
        [logged] = mlflow.search_logged_models(experiment_ids=[experiment], output_format="list")
        served = mlflow.pyfunc.load_model(logged.model_uri)
        np.testing.assert_allclose(served.predict(images), first(images, training=False), atol=1e-6)
        assert record.register_champion(mlflow_client, "models-test", run_id) == "1"
        weights = Path(logged.artifact_location.removeprefix("file://")) / "data" / "model" / \
            model_files.WEIGHTS_FILE
        content = bytearray(weights.read_bytes())
        content[-1] ^= 1
        weights.write_bytes(bytes(content))
        with pytest.raises(ModelFileError, match="sha256"):
            record.register_champion(mlflow_client, "models-test", run_id)
        with pytest.raises(ModelFileError, match="sha256"):
            mlflow.pyfunc.load_model(logged.model_uri)
    finally:
        mlflow.set_tracking_uri(None)


def test_a_checkpoint_restores_only_the_files_it_saved(tmp_path):
    from training.strategies.checkpoints import CheckpointStore

    store = CheckpointStore((tmp_path / "run").as_uri())
    variable = tf.Variable([1.0, 2.0])
    store.save(1, tf.train.Checkpoint(v=variable), {"epochs": [1]})
    restored = tf.Variable([0.0, 0.0])
    assert store.restore(1, tf.train.Checkpoint(v=restored)) == {"epochs": [1]}
    np.testing.assert_array_equal(restored.numpy(), [1.0, 2.0])
    [data] = (tmp_path / "run" / "checkpoints" / "epoch-0001").glob("state.data-*")
    content = bytearray(data.read_bytes())
    content[-1] ^= 1
    data.write_bytes(bytes(content))
    with pytest.raises(storage.DatasetError, match="epoch-0001: its files are not the ones saved"):
        store.restore(1, tf.train.Checkpoint(v=restored))
    (tmp_path / "run" / "checkpoints" / "epoch-0001" / "digests.json").unlink()
    with pytest.raises(storage.DatasetError, match="no readable digests.json"):
        store.restore(1, tf.train.Checkpoint(v=restored))


def test_no_module_loads_a_model_but_the_one_loader():
    """Every model the project reads goes through training.models.model_files: no other load_model call, no
    pickle, no numpy file read with pickles allowed."""
    import re

    root = Path(__file__).resolve().parent.parent
    offenders = []
    patterns = re.compile(r"keras\.models\.load_model|saving\.load_model|\bpickle\.loads?\(|allow_pickle=True|"
                          r"mlflow\.\w+\.load_model|keras\.models\.model_from_(json|config|yaml)|\bmodel_from_json\(")
    for path in sorted((root / "training").rglob("*.py")) + sorted((root / "plugins").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if patterns.search(line) and not line.strip().startswith(('"""', "#")) \
                    and "pickle.loads(pickle.dumps(" not in line:  # a worker's own exception, checked before sending
                offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("key", ["architecture", "files", "model_format", "kind", "data_version"])
def test_any_model_manifest_entry_of_any_wrong_type_is_refused_in_one_line(published, tmp_path, key):
    root, _ = published
    target = copy_model(root, "first", tmp_path / "model")
    original = (target / storage.MANIFEST_NAME).read_text()
    for value in [None, True, -1, float("nan"), "x" * 300, [], {}, [None], {"a": 1}, "../../etc/passwd"]:
        manifest = json.loads(original)
        manifest[key] = value
        (target / storage.MANIFEST_NAME).write_text(json.dumps(manifest))
        record = {"result": {"model_uri": str(target)}, "model_version": json.loads(original)["data_version"]}
        with pytest.raises(storage.DatasetError) as refusal:
            model_files.load_run_model(record)
        assert len(str(refusal.value).splitlines()) == 1 and str(target) in str(refusal.value), (value, refusal.value)
