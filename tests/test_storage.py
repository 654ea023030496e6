"""Dataset URIs, atomic publication and manifests, on the local filesystem (and on HDFS when one is given)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from training import storage

KIND = "test-records"


def write_files(contents: dict[str, bytes]):
    """A ``write`` callback for ``publish`` that writes ``contents`` (relative path → bytes) into staging."""

    def write(staging: storage.Location) -> dict:
        for relative, data in contents.items():
            parent = f"{staging.path}/{relative}".rsplit("/", 1)[0]
            staging.fs.makedirs(parent, exist_ok=True)
            with staging.fs.open(f"{staging.path}/{relative}", "wb") as handle:
                handle.write(data)
        return {"rows": len(contents)}

    return write


@pytest.fixture
def destination(tmp_path) -> Path:
    parent = tmp_path / "datasets"
    parent.mkdir()
    return parent / "records"


def siblings(destination: Path) -> list[str]:
    """Everything next to ``destination`` except itself: staging or retired copies that were left behind."""
    return sorted(path.name for path in destination.parent.iterdir() if path != destination)


# --- URIs --------------------------------------------------------------------------------------------------


def test_relative_path_becomes_an_absolute_file_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.to_uri("data/../datasets/mnist") == (tmp_path.resolve() / "datasets" / "mnist").as_uri()


def test_home_directory_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert storage.to_uri("~/datasets") == (tmp_path.resolve() / "datasets").as_uri()


def test_file_uri_is_normalised(tmp_path):
    root = tmp_path.resolve()
    assert storage.to_uri(f"file://{root}/a/../b/") == (root / "b").as_uri()
    assert storage.to_uri(str(root / "b")) == storage.to_uri((root / "b").as_uri())


def test_hdfs_uri_is_kept_without_trailing_slash():
    assert storage.to_uri("hdfs://namenode:8020/datasets/mnist/") == "hdfs://namenode:8020/datasets/mnist"
    assert storage.to_uri("hdfs://namenode/datasets") == "hdfs://namenode/datasets"


def test_hdfs_uri_without_a_namenode_host_is_rejected():
    with pytest.raises(storage.DatasetError, match=r"^hdfs:///datasets: an hdfs URI needs a namenode host"):
        storage.to_uri("hdfs:///datasets")


@pytest.mark.parametrize("location", ["s3://bucket/datasets", "http://example.org/mnist", "gs://bucket/x"])
def test_other_schemes_are_rejected_naming_the_scheme(location):
    scheme = location.split(":", 1)[0]
    expected = f"^{re.escape(location)}: unsupported scheme '{scheme}' \\(use a local path, file:// or hdfs://\\)"
    with pytest.raises(storage.DatasetError, match=expected):
        storage.to_uri(location)


def test_data_root_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDBURST_DATA_ROOT", str(tmp_path / "root"))
    assert storage.data_root() == (tmp_path.resolve() / "root").as_uri()
    monkeypatch.setenv("CLOUDBURST_DATA_ROOT", "hdfs://namenode:8020/cloudburst/")
    assert storage.data_root() == "hdfs://namenode:8020/cloudburst"


def test_tests_never_default_to_the_checkout(isolated_data_root):
    assert storage.data_root() == isolated_data_root.resolve().as_uri()
    assert not storage.data_root().startswith(storage.REPO_ROOT.as_uri())


def test_join_appends_segments_with_single_slashes():
    assert storage.join("hdfs://nn:8020/root/", "/mnist/", "raw") == "hdfs://nn:8020/root/mnist/raw"


# --- Publication -------------------------------------------------------------------------------------------


def test_publish_writes_the_files_then_the_manifest_then_moves_into_place(destination):
    observed = {}
    write = write_files({"part-0.bin": b"abc", "train/part-1.bin": b"defg"})

    def observing_write(staging: storage.Location) -> dict:
        content = write(staging)
        observed["destination_exists"] = destination.exists()
        observed["manifest_in_staging"] = (Path(staging.path) / storage.MANIFEST_NAME).exists()
        observed["staging_is_hidden_sibling"] = Path(staging.path).parent == destination.parent and Path(
            staging.path
        ).name.startswith(f".{destination.name}.tmp-")
        return content

    manifest, created = storage.publish(str(destination), KIND, {"recipe": 1}, observing_write)

    assert created
    assert observed == {"destination_exists": False, "manifest_in_staging": False,
                        "staging_is_hidden_sibling": True}
    assert sorted(manifest["files"]) == ["part-0.bin", "train/part-1.bin"]
    assert (destination / "train" / "part-1.bin").read_bytes() == b"defg"
    assert storage.read_manifest(str(destination)) == manifest
    assert manifest["kind"] == KIND and manifest["recipe"] == {"recipe": 1} and manifest["rows"] == 2
    assert manifest["uri"] == destination.as_uri()
    assert siblings(destination) == []


def test_failing_write_leaves_no_destination_and_no_staging(destination):
    def failing_write(staging: storage.Location) -> dict:
        write_files({"part-0.bin": b"half"})(staging)
        raise RuntimeError("worker lost")

    with pytest.raises(RuntimeError, match="worker lost"):
        storage.publish(str(destination), KIND, {}, failing_write)
    assert not destination.exists()
    assert siblings(destination) == []
    assert storage.read_manifest(str(destination)) is None


def test_hidden_and_marker_files_are_not_listed_in_the_manifest(destination):
    contents = {"part-0.bin": b"a", "_SUCCESS": b"", ".part-0.bin.crc": b"c", "_temporary/x": b"t"}
    manifest, _ = storage.publish(str(destination), KIND, {}, write_files(contents))
    assert manifest["files"] == {"part-0.bin": storage.file_sha256(storage.resolve(str(destination)).fs,
                                                                   str(destination / "part-0.bin"))}


def test_republishing_the_same_recipe_is_a_noop(destination):
    first, created = storage.publish(str(destination), KIND, {"seed": 1}, write_files({"a": b"1"}))
    manifest_mtime = (destination / storage.MANIFEST_NAME).stat().st_mtime_ns

    def must_not_run(staging):
        raise AssertionError("write called for a complete dataset")

    second, created_again = storage.publish(str(destination), KIND, {"seed": 1}, must_not_run)
    assert (created, created_again) == (True, False)
    assert second == first
    assert (destination / storage.MANIFEST_NAME).stat().st_mtime_ns == manifest_mtime


def test_a_publisher_that_finishes_second_keeps_the_first_copy_in_place(destination):
    """Two DAG runs sharing a data root build the same dataset at once. The one that finishes second must not
    move the first one's copy aside (a reader of it would find nothing): it returns that copy, created=False."""
    import threading

    second_is_writing, first_is_published = threading.Event(), threading.Event()

    def write_first(staging):
        assert second_is_writing.wait(30)  # both have seen an empty destination
        return write_files({"part-0.bin": b"same bytes"})(staging)

    def write_second(staging):
        second_is_writing.set()
        assert first_is_published.wait(30)
        return write_files({"part-0.bin": b"same bytes"})(staging)

    results: dict = {}

    def publish(name, write):
        results[name] = storage.publish(str(destination), KIND, {"seed": 1}, write)
        if name == "first":
            results["inode"] = destination.stat().st_ino
            first_is_published.set()

    threads = [threading.Thread(target=publish, args=("first", write_first)),
               threading.Thread(target=publish, args=("second", write_second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    (first, first_created), (second, second_created) = results["first"], results["second"]
    assert (first_created, second_created) == (True, False)
    assert second == first
    assert destination.stat().st_ino == results["inode"], "the first copy was moved away"
    assert sorted(path.name for path in destination.iterdir()) == sorted([storage.MANIFEST_NAME, "part-0.bin"])
    assert siblings(destination) == []


def test_four_publishers_at_the_same_moment_leave_one_complete_copy_and_nothing_else(destination):
    import threading

    everyone_written = threading.Barrier(4, timeout=30)

    def write_together(staging):
        write_files({"part-0.bin": b"same bytes"})(staging)
        everyone_written.wait()  # every staging complete before any rename
        return {"rows": 1}

    results: list = []
    threads = [threading.Thread(target=lambda: results.append(
        storage.publish(str(destination), KIND, {"seed": 1}, write_together))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 4
    in_place = storage.require_manifest(str(destination), KIND)
    assert all(manifest["data_version"] == in_place["data_version"] for manifest, _ in results)
    assert sorted(path.name for path in destination.iterdir()) == sorted([storage.MANIFEST_NAME, "part-0.bin"])
    assert siblings(destination) == []


@pytest.mark.parametrize(("kind", "recipe"), [(KIND, {"seed": 2}), ("other-kind", {"seed": 1})])
def test_a_different_dataset_at_the_destination_is_refused_without_overwrite(destination, kind, recipe):
    original, _ = storage.publish(str(destination), KIND, {"seed": 1}, write_files({"a": b"1"}))
    with pytest.raises(storage.DatasetError, match="already holds a different dataset.*--overwrite"):
        storage.publish(str(destination), kind, recipe, write_files({"a": b"2"}))
    assert storage.read_manifest(str(destination)) == original
    assert (destination / "a").read_bytes() == b"1"


def test_overwrite_replaces_every_file_and_leaves_nothing_beside_it(destination):
    storage.publish(str(destination), KIND, {"seed": 1}, write_files({"old.bin": b"1", "shared.bin": b"1"}))
    manifest, created = storage.publish(str(destination), KIND, {"seed": 2},
                                        write_files({"shared.bin": b"2", "new.bin": b"2"}), overwrite=True)
    assert created
    remaining = sorted(path.name for path in destination.iterdir())
    assert remaining == [storage.MANIFEST_NAME, "new.bin", "shared.bin"]
    assert (destination / "shared.bin").read_bytes() == b"2"
    assert storage.read_manifest(str(destination)) == manifest
    assert siblings(destination) == []


def test_failing_overwrite_keeps_the_previous_dataset(destination):
    original, _ = storage.publish(str(destination), KIND, {"seed": 1}, write_files({"a": b"1"}))

    def failing_write(staging):
        raise OSError("quota exceeded")

    with pytest.raises(OSError, match="quota exceeded"):
        storage.publish(str(destination), KIND, {"seed": 2}, failing_write, overwrite=True)
    assert storage.read_manifest(str(destination)) == original
    assert (destination / "a").read_bytes() == b"1"
    assert siblings(destination) == []


def test_directory_without_manifest_is_absent_and_gets_replaced(destination):
    destination.mkdir()
    (destination / "part-0.bin").write_bytes(b"left by a crashed job")
    assert storage.read_manifest(str(destination)) is None

    manifest, created = storage.publish(str(destination), KIND, {}, write_files({"part-1.bin": b"new"}))

    assert created
    assert sorted(path.name for path in destination.iterdir()) == [storage.MANIFEST_NAME, "part-1.bin"]
    assert storage.read_manifest(str(destination)) == manifest
    assert siblings(destination) == []


def test_require_manifest_for_a_missing_dataset_says_to_create_it(destination):
    expected = (f"^{re.escape(destination.as_uri())}: "
                r"no complete dataset here \(no _manifest\.json\); create it first$")
    with pytest.raises(storage.DatasetError, match=expected):
        storage.require_manifest(str(destination))


def test_require_manifest_for_the_wrong_kind_names_both_kinds(destination):
    storage.publish(str(destination), KIND, {}, write_files({"a": b"1"}))
    assert storage.require_manifest(str(destination), KIND)["kind"] == KIND
    expected = f"^{re.escape(destination.as_uri())}: expected a 'mnist-images' dataset, found '{KIND}'$"
    with pytest.raises(storage.DatasetError, match=expected):
        storage.require_manifest(str(destination), "mnist-images")


# --- Data versions -----------------------------------------------------------------------------------------


def test_data_version_depends_on_content_only_and_changes_with_any_byte(tmp_path):
    contents = {"train/part-0.bin": bytes(range(256)) * 4, "test/part-0.bin": b"test split"}
    first, _ = storage.publish(str(tmp_path / "first"), KIND, {"run": 1}, write_files(contents))
    same, _ = storage.publish(str(tmp_path / "same"), "another-kind", {"run": 2}, write_files(contents))
    changed_bytes = bytearray(contents["train/part-0.bin"])
    changed_bytes[500] ^= 1
    changed, _ = storage.publish(str(tmp_path / "changed"), KIND, {"run": 1},
                                 write_files({**contents, "train/part-0.bin": bytes(changed_bytes)}))
    assert same["data_version"] == first["data_version"]
    assert changed["data_version"] != first["data_version"]
    assert changed["files"]["test/part-0.bin"] == first["files"]["test/part-0.bin"]


def test_data_version_depends_on_file_names_too():
    files = {"a": "0" * 64, "b": "1" * 64}
    assert storage.data_version(files) == storage.data_version(dict(reversed(files.items())))
    assert storage.data_version(files) != storage.data_version({"a": "1" * 64, "b": "0" * 64})
    assert storage.data_version(files) != storage.data_version({"a": "0" * 64, "c": "1" * 64})


# --- HDFS (the real daemons of make test) -------------------------------------------------------------------

KILLED_WRITER = """
import sys, time
from training import storage
sys.path.insert(0, sys.argv[3])
from test_storage import write_files

def write_then_hang(staging):
    write_files({f"train/part-{i}.bin": bytes(1000) for i in range(3)})(staging)
    print("written", flush=True)
    time.sleep(600)  # killed here: files written, manifest not yet
    return {}

storage.publish(sys.argv[1], sys.argv[2], {"hdfs": True}, write_then_hang)
"""


@pytest.mark.hadoop
def test_publish_to_hdfs_round_trip_and_republish_is_a_noop(hdfs_root):
    destination = storage.join(hdfs_root, "records")
    where = storage.resolve(destination)
    manifest, created = storage.publish(destination, KIND, {"hdfs": True},
                                        write_files({"train/part-0.bin": b"on hdfs"}))
    assert created and manifest["uri"] == destination
    assert storage.read_manifest(destination) == manifest
    assert storage.require_manifest(destination, KIND)["files"] == manifest["files"]
    assert sorted(manifest["files"]) == ["train/part-0.bin"]
    with where.fs.open(f"{where.path}/train/part-0.bin", "rb") as handle:
        assert handle.read() == b"on hdfs"
    _, created_again = storage.publish(destination, KIND, {"hdfs": True}, write_files({}))
    assert not created_again
    assert where.fs.ls(where.path.rsplit("/", 1)[0], detail=False) == [where.path], "staging left beside it"


@pytest.mark.hadoop
def test_a_writer_killed_mid_way_on_hdfs_leaves_no_dataset_and_a_rerun_publishes(hdfs_root, tmp_path):
    import signal
    import subprocess
    import sys

    destination = storage.join(hdfs_root, "records")
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, destination, KIND, str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "written"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert storage.read_manifest(destination) is None
    where = storage.resolve(destination)
    assert not where.fs.exists(where.path), "a partial dataset is visible at the destination"
    manifest, created = storage.publish(destination, KIND, {"hdfs": True}, write_files({"train/part-0.bin": b"x"}))
    assert created and sorted(manifest["files"]) == ["train/part-0.bin"]


@pytest.mark.hadoop
def test_hdfs_problems_are_one_line_errors_naming_the_fix(hadoop, monkeypatch):
    from urllib.parse import urlparse

    parsed = urlparse(hadoop.hdfs_uri)
    expected = rf"takes hdfs:// connections on port {parsed.port}, not on port 1; use hdfs://{parsed.hostname}:"
    with pytest.raises(storage.DatasetError, match=expected):
        storage.resolve(f"hdfs://{parsed.hostname}:1/cloudburst")
    monkeypatch.setenv("CLOUDBURST_WEBHDFS_PORT", "1")
    with pytest.raises(storage.DatasetError, match=r"HDFS does not answer .* refused .*make hadoop-up"):
        storage.resolve(f"{hadoop.hdfs_uri}/cloudburst")


def test_parquet_content_ids_ignore_the_footers_encoding_order_but_not_the_data(tmp_path):
    """Spark's parquet-mr lists a column's encodings in a per-JVM order: the same rows written by two JVMs differ
    in a few footer bytes. The content id must match for them, and differ for any change in the data."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"label": pa.array([1, 2, 3], pa.int8()), "image": [b"a", b"b", b"c"]})
    path = tmp_path / "part-00000.parquet"
    pq.write_table(table, path)
    fs = storage.resolve(str(tmp_path)).fs
    original = storage.file_digest(fs, str(path))
    content = bytearray(path.read_bytes())
    footer_length = int.from_bytes(content[-8:-4], "little")
    footer = bytes(content[len(content) - 8 - footer_length: len(content) - 8])
    metadata = pq.read_metadata(path)
    encodings = metadata.row_group(0).column(0).encodings
    assert len(encodings) > 1
    # The same file with one footer list reordered, as another JVM would write it: same content id, other sha256.
    reordered = bytearray(content)
    # Thrift compact lists of i32 enums: swapping two one-byte elements keeps the footer's length.
    codes = {"PLAIN": 0, "PLAIN_DICTIONARY": 2, "RLE": 3, "BIT_PACKED": 4, "RLE_DICTIONARY": 8}
    first, second = (codes[name] * 2 for name in encodings[:2])  # zigzag encoding of small non-negative ints
    start = len(content) - 8 - footer_length
    at = footer.find(bytes([first, second]))
    assert at >= 0
    reordered[start + at: start + at + 2] = bytes([second, first])
    (tmp_path / "reordered.parquet").write_bytes(reordered)
    assert storage.file_sha256(fs, str(tmp_path / "reordered.parquet")) != storage.file_sha256(fs, str(path))
    assert storage.file_digest(fs, str(tmp_path / "reordered.parquet")) == original
    changed = tmp_path / "changed.parquet"
    pq.write_table(pa.table({"label": pa.array([1, 2, 4], pa.int8()), "image": [b"a", b"b", b"c"]}), changed)
    assert storage.file_digest(fs, str(changed)) != original
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(storage.DatasetError, match="not a Parquet file"):
        storage.file_digest(fs, str(tmp_path / "broken.parquet"))


def hostile_parquet(marker: Path) -> bytes:
    """A Parquet file whose column type is a pickled Python extension type that writes ``marker`` when unpickled
    (CVE-2023-47248: pyarrow < 14 unpickles it when the file's schema is read)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    class Payload:
        def __reduce__(self):
            return (Path(str(marker)).write_text, ("ran",))

    class Hostile(pa.PyExtensionType):
        def __init__(self):
            super().__init__(pa.int64())

        def __reduce__(self):
            return Payload().__reduce__()

    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": pa.ExtensionArray.from_storage(Hostile(), pa.array([1, 2]))}), buffer)
    return buffer.getvalue()


def test_a_parquet_file_naming_a_pickled_type_never_runs_code_and_is_refused_in_one_line(destination, tmp_path):
    marker = tmp_path / "marker"
    content = hostile_parquet(marker)  # training.storage's import of pyarrow_hotfix is what keeps it from running
    storage.publish(str(destination), KIND, {}, write_files({"train/part-0.parquet": parquet_bytes([1, 2])}))
    manifest_path = destination / storage.MANIFEST_NAME
    manifest = __import__("json").loads(manifest_path.read_text())
    manifest["splits"] = {"train": {}}
    manifest_path.write_text(__import__("json").dumps(manifest))
    (destination / "train" / "part-0.parquet").write_bytes(content)
    with pytest.raises(storage.DatasetError) as refusal:  # its digest cannot even be taken without the schema
        storage.read_split_table(str(destination), KIND, "train")
    assert "not a readable Parquet file (Disallowed deserialization" in str(refusal.value)
    assert len(str(refusal.value).splitlines()) == 1
    assert not marker.exists()


def parquet_bytes(values: list[int]) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": values}), buffer)
    return buffer.getvalue()


def test_a_published_parquet_file_changed_after_publication_is_refused(destination):
    storage.publish(str(destination), KIND, {}, write_files({"train/part-0.parquet": parquet_bytes([1, 2, 3])}))
    manifest = storage.require_manifest(str(destination), KIND)
    manifest_with_split = {**manifest, "splits": {"train": {}}}
    assert storage.read_published_parquet(str(destination), manifest_with_split, "train/part-0.parquet").num_rows == 3
    (destination / "train" / "part-0.parquet").write_bytes(parquet_bytes([1, 2, 4]))
    with pytest.raises(storage.DatasetError, match="part-0.parquet: not the file its dataset's manifest recorded"):
        storage.read_published_parquet(str(destination), manifest_with_split, "train/part-0.parquet")


def test_a_damaged_manifest_or_json_record_is_one_line_naming_the_file(destination, tmp_path):
    storage.publish(str(destination), KIND, {}, write_files({"a.bin": b"a"}))
    manifest = destination / storage.MANIFEST_NAME
    manifest.write_text(manifest.read_text()[:145])
    with pytest.raises(storage.DatasetError, match=r"_manifest.json: damaged, not valid JSON"):
        storage.read_manifest(str(destination))
    manifest.write_text("[" * 100_000)
    with pytest.raises(storage.DatasetError, match="damaged"):
        storage.read_manifest(str(destination))
    record = tmp_path / "result.json"
    record.write_text('{"result": ')
    with pytest.raises(storage.DatasetError, match="result.json: damaged"):
        storage.read_json(str(record))
