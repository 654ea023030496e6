"""Dataset locations as URIs, atomic publication and manifests.

A dataset is a directory addressed by a URI: ``file:///abs/path`` (the embedded default, rooted at ``./var``)
or ``hdfs://namenode:8020/path``. Spark reads and writes both natively; Python code goes through fsspec
(local files, or WebHDFS for ``hdfs://``, failing over between replicas: training.webhdfs). A dataset is complete
only when its manifest exists: every publisher writes into a temporary sibling, writes the manifest last, then
renames the sibling into place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import fsspec

from training import REPO_ROOT, local_files

try:  # pyarrow < 14 (the training environment's 10) unpickles any extension type a Parquet file names (CVE-2023-47248)
    import pyarrow_hotfix  # noqa: F401  (forbids that type: such a file is refused instead of running code)
except ImportError:  # the Airflow environment: pyarrow 25, not affected, reads no Parquet
    pass
from training.webhdfs import FailoverWebHDFS

log = logging.getLogger(__name__)

MANIFEST_NAME = "_manifest.json"
MANIFEST_FORMAT = 1
MAX_MANIFEST_BYTES = 256 * 2**20  # a manifest lists its files; the largest here are a few MB


class DatasetError(ValueError):
    """A dataset location, its manifest or its contents are not what the caller asked for."""


def data_root() -> str:
    """Root URI for datasets: ``$CLOUDBURST_DATA_ROOT`` or ``file://<checkout>/var/datasets``."""
    configured = os.environ.get("CLOUDBURST_DATA_ROOT")
    if configured:
        return to_uri(configured)
    return (REPO_ROOT / "var" / "datasets").as_uri()


def to_uri(location: str) -> str:
    """Normalise a plain path or URI into a URI (``file://`` for local paths)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else location
        return Path(path).expanduser().resolve().as_uri()
    if parsed.scheme == "hdfs":
        if not parsed.hostname:
            raise DatasetError(f"{location}: an hdfs URI needs a namenode host, e.g. hdfs://namenode:8020/path")
        return location.rstrip("/")
    raise DatasetError(f"{location}: unsupported scheme {parsed.scheme!r} (use a local path, file:// or hdfs://)")


def join(uri: str, *parts: str) -> str:
    """Append path segments to a URI."""
    return "/".join([uri.rstrip("/"), *(part.strip("/") for part in parts)])


@dataclass(frozen=True)
class Location:
    """A URI resolved to an fsspec filesystem and the path on it."""

    uri: str
    fs: fsspec.AbstractFileSystem
    path: str


def resolve(location: str) -> Location:
    """Resolve a path or URI to its filesystem; ``hdfs://`` goes through WebHDFS from Python."""
    uri = to_uri(location)
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Location(uri, fsspec.filesystem("file"), parsed.path)
    port = webhdfs_port()
    check_namenode(parsed.hostname, parsed.port or DEFAULT_NAMENODE_RPC_PORT, port)
    user = os.environ.get("CLOUDBURST_HDFS_USER") or os.environ.get("HADOOP_USER_NAME")
    fs = FailoverWebHDFS(host=parsed.hostname, port=port, user=user)
    return Location(uri, fs, parsed.path or "/")


DEFAULT_NAMENODE_RPC_PORT = 8020  # what hdfs://host/path means to Spark and Hadoop
_checked_namenodes: set[tuple[str, int, int]] = set()


def webhdfs_port() -> int:
    """The NameNode's HTTP port (WebHDFS and JMX): $CLOUDBURST_WEBHDFS_PORT or Hadoop's default 9870."""
    return int(os.environ.get("CLOUDBURST_WEBHDFS_PORT", "9870"))


def check_namenode(host: str, rpc_port: int, http_port: int) -> None:
    """Fail early and in one line when HDFS cannot take a pipeline step: the NameNode does not answer, is in safe
    mode, or listens for RPC on another port than the URI's (Python would reach it over WebHDFS while Spark's
    hdfs:// client could not). Checked once per NameNode and process."""
    if (host, rpc_port, http_port) in _checked_namenodes:
        return
    import urllib.error
    import urllib.request

    where = f"hdfs://{host}:{rpc_port}"
    url = f"http://{host}:{http_port}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo"
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            beans = json.load(reply).get("beans") or [{}]
        url = f"http://{host}:{http_port}/jmx?qry=Hadoop:service=NameNode,name=NameNodeStatus"
        with urllib.request.urlopen(url, timeout=10) as reply:
            status = (json.load(reply).get("beans") or [{}])[0]
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise DatasetError(f"{where}: HDFS does not answer — the NameNode's HTTP port {host}:{http_port} gave "
                           f"{reason} (is HDFS up? `make hadoop-up`; another port: $CLOUDBURST_WEBHDFS_PORT)") from None
    safe_mode = beans[0].get("Safemode", "")
    if safe_mode:
        raise DatasetError(f"{where}: HDFS is in safe mode and refuses writes ({safe_mode.strip()}); wait until it "
                           f"leaves (`infra/hadoop/hadoop.sh status`) or check its DataNodes")
    listening = status.get("HostAndPort", "")  # e.g. localhost:8020: the port is what matters here
    port = listening.rsplit(":", 1)[-1]
    if port.isdigit() and int(port) != rpc_port:
        raise DatasetError(f"{where}: the NameNode at {host} takes hdfs:// connections on port {port}, not on port "
                           f"{rpc_port}; use hdfs://{host}:{port}/…")
    _checked_namenodes.add((host, rpc_port, http_port))


def read_manifest(location: str) -> dict[str, Any] | None:
    """The dataset's manifest, or None when the dataset is absent or incomplete."""
    where = resolve(location)
    manifest_path = f"{where.path}/{MANIFEST_NAME}"
    if not where.fs.exists(manifest_path):
        return None
    shown = join(where.uri, MANIFEST_NAME)
    if where.uri.startswith("file://") and not local_files.is_regular_file(manifest_path):
        raise DatasetError(f"{shown}: not a regular file; a manifest is one")
    with where.fs.open(manifest_path, "rb") as handle:
        content = handle.read(MAX_MANIFEST_BYTES + 1)
    if len(content) > MAX_MANIFEST_BYTES:
        raise DatasetError(f"{shown}: larger than the {MAX_MANIFEST_BYTES:,} bytes a manifest may hold")
    return _json_object(content, shown, "; publish it again")


def _json_object(content: bytes, shown: str, advice: str = "") -> dict[str, Any]:
    """A JSON document that must be an object; a DatasetError naming ``shown`` for anything else."""
    try:
        document = json.loads(content)
    except (ValueError, RecursionError) as error:
        raise DatasetError(f"{shown}: damaged, not valid JSON ({str(error)[:100]}){advice}") from None
    if not isinstance(document, dict):
        raise DatasetError(f"{shown}: damaged, not a JSON object{advice}")
    return document


def require_manifest(location: str, kind: str | None = None) -> dict[str, Any]:
    """The manifest of a complete dataset, or a clear error saying what to run first."""
    manifest = read_manifest(location)
    if manifest is None:
        raise DatasetError(f"{to_uri(location)}: no complete dataset here (no {MANIFEST_NAME}); create it first")
    if kind is not None and manifest.get("kind") != kind:
        raise DatasetError(f"{to_uri(location)}: expected a {kind!r} dataset, found {manifest.get('kind')!r}")
    return manifest


def file_sha256(fs: fsspec.AbstractFileSystem, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A file's content id for manifests: its sha256, except for Parquet written by Spark, whose footer lists each
    column's encodings in the order of a Java HashSet of enums — an order that changes from one JVM to the next,
    so two runs writing the same rows (local mode or YARN) differ in a few footer bytes. For Parquet the id is the
    sha256 of the data pages (every byte before the footer) plus the footer's meaning: schema, row groups' rows
    and values, key-value metadata."""
    if not path.endswith(".parquet"):
        return file_sha256(fs, path)
    with fs.open(path, "rb") as handle:
        return parquet_digest(handle.read(), path)


def parquet_digest(content: bytes, path: str) -> str:
    """:func:`file_digest` of a Parquet file's bytes."""
    import io

    import pyarrow.parquet as pq

    footer_length = int.from_bytes(content[-8:-4], "little") if content[-4:] == b"PAR1" else -1
    if content[:4] != b"PAR1" or not 0 < footer_length <= len(content) - 12:
        raise DatasetError(f"{path}: not a Parquet file (no PAR1 magic or a bad footer length)")
    try:
        metadata = pq.read_metadata(io.BytesIO(content))
        schema = str(metadata.schema.to_arrow_schema())
    except (RuntimeError, OSError, ValueError) as error:  # pyarrow_hotfix refuses a pickled type: RuntimeError
        raise DatasetError(f"{path}: not a readable Parquet file "
                           f"({(str(error).splitlines() or ['?'])[0][:100]})") from None
    digest = hashlib.sha256(content[: len(content) - 8 - footer_length])
    digest.update(schema.encode())
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        digest.update(f"{group}:{row_group.num_rows}".encode())
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            digest.update(f"{chunk.path_in_schema}:{chunk.compression}:{chunk.data_page_offset}:"
                          f"{chunk.total_compressed_size}:{sorted(chunk.encodings)}".encode())
    for key, value in sorted((metadata.metadata or {}).items()):
        digest.update(key + b"=" + value)
    return digest.hexdigest()


def code_version() -> str:
    """Package version plus the git commit of the checkout, when there is one."""
    from training import __version__

    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return f"{__version__}+{commit}"


def _listing(where: Location) -> dict[str, str]:
    """Relative path → sha256 for every data file below a directory (hidden and Spark marker files skipped)."""
    files: dict[str, str] = {}
    for path in sorted(where.fs.find(where.path)):
        relative = path[len(where.path.rstrip("/")) + 1 :]
        if any(part.startswith((".", "_")) for part in relative.split("/")):
            continue
        files[relative] = file_digest(where.fs, path)
    return files


def data_version(files: dict[str, str]) -> str:
    """A short content id of a dataset: changes whenever any file's bytes change."""
    digest = hashlib.sha256()
    for relative, sha in sorted(files.items()):
        digest.update(f"{relative}\0{sha}\n".encode())
    return digest.hexdigest()[:12]


def _remove(where: Location, path: str) -> None:
    if where.fs.exists(path):
        where.fs.rm(path, recursive=True)


@contextmanager
def staging_area(destination: str) -> Iterator[Location]:
    """A fresh temporary sibling of ``destination``; removed again if the block fails."""
    where = resolve(destination)
    parent, name = where.path.rstrip("/").rsplit("/", 1)
    staging_name = f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    staging_path = f"{parent}/{staging_name}"
    staging_uri = f"{where.uri.rstrip('/').rsplit('/', 1)[0]}/{staging_name}"
    where.fs.makedirs(staging_path, exist_ok=True)
    try:
        yield Location(staging_uri, where.fs, staging_path)
    except BaseException:
        try:
            _remove(where, staging_path)
        except Exception as cleanup_error:  # e.g. the NameNode went away: the error that stopped the step matters
            log.warning("%s: the unfinished copy %s could not be removed (%s); it has no manifest and is never read "
                        "as a dataset", where.uri, staging_uri, cleanup_error)
        raise


def publish(
    destination: str,
    kind: str,
    recipe: dict[str, Any],
    write: Callable[[Location], dict[str, Any]],
    overwrite: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Build a dataset atomically; return (manifest, created).

    ``recipe`` says what the dataset is made from (inputs and parameters). If ``destination`` already holds a
    complete dataset of the same recipe nothing is done (created=False); a different recipe is an error unless
    ``overwrite``. ``write`` fills the staging location and returns the manifest's content fields.
    """
    existing = read_manifest(destination)
    if existing is not None and not overwrite:
        if existing.get("kind") == kind and existing.get("recipe") == recipe:
            return existing, False
        raise DatasetError(
            f"{to_uri(destination)}: already holds a different dataset (kind {existing.get('kind')!r}, "
            f"recipe {existing.get('recipe')}); choose another destination or pass --overwrite"
        )
    where = resolve(destination)
    with staging_area(destination) as staging:
        content = write(staging)
        files = _listing(staging)
        manifest = {
            "format": MANIFEST_FORMAT,
            "kind": kind,
            "uri": where.uri,
            "recipe": recipe,
            **content,
            "files": files,
            "data_version": data_version(files),
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "code_version": code_version(),
        }
        # The manifest goes in last: a directory without one is never mistaken for a dataset.
        with staging.fs.open(f"{staging.path}/{MANIFEST_NAME}", "wb") as handle:
            handle.write(json.dumps(manifest, indent=2, sort_keys=True).encode())
        # Two runs may build the same dataset at once (two DAG runs sharing a data root): whoever finishes
        # second keeps the first one's copy instead of moving it aside under a reader's feet.
        winner = None if overwrite else read_manifest(destination)
        if winner is not None and winner.get("kind") == kind and winner.get("recipe") == recipe:
            _remove(where, staging.path)
            return winner, False
        try:
            _replace(where, staging)
        except OSError:
            # Another publisher renamed its copy into place between the check above and this rename (a local
            # rename onto a directory that is no longer empty fails): keep the first copy, as above.
            winner = None if overwrite else read_manifest(destination)
            if winner is None or winner.get("kind") != kind or winner.get("recipe") != recipe:
                raise
            _remove(where, staging.path)
            return winner, False
    return manifest, True


def _replace(where: Location, staging: Location) -> None:
    """Rename staging into place; an incomplete or overwritten old copy is moved aside first, then deleted."""
    retired = None
    if where.fs.exists(where.path):
        retired = f"{staging.path}-retired"
        where.fs.mv(where.path, retired, recursive=True)
    where.fs.mv(staging.path, where.path, recursive=True)
    # A rename onto a directory that appeared meanwhile (a concurrent publisher) moves *into* it on both local
    # disks and HDFS; the copy that landed inside is ours and redundant.
    nested = f"{where.path}/{staging.path.rsplit('/', 1)[1]}"
    if where.fs.exists(nested):
        _remove(where, nested)
    if retired is not None:
        _remove(where, retired)


def read_split_table(dataset: str, kind: str, split: str, columns: list[str] | None = None) -> Any:
    """All Parquet files of one split of a complete dataset as one pyarrow Table (files in name order); only
    ``columns`` when given."""
    import pyarrow as pa

    manifest = require_manifest(dataset, kind)
    splits = manifest.get("splits")
    if not isinstance(splits, dict) or split not in splits:
        raise DatasetError(f"{dataset}: no split {split!r} (has {sorted(splits or [])})")
    return pa.concat_tables([read_published_parquet(dataset, manifest, name, columns)
                             for name in sorted(name for name in manifest["files"] if name.startswith(f"{split}/"))])


def read_published_parquet(dataset: str, manifest: dict[str, Any], name: str,
                           columns: list[str] | None = None) -> Any:
    """One Parquet file of a complete dataset as a pyarrow Table, read only when its bytes are the ones the
    manifest recorded; a DatasetError naming the file otherwise (a changed file, or one naming a Python extension
    type, which pyarrow would unpickle)."""
    import io

    import pyarrow.parquet as pq

    where = resolve(dataset)
    shown = join(where.uri, name)
    recorded = (manifest.get("files") or {}).get(name)
    try:
        with where.fs.open(f"{where.path}/{name}", "rb") as handle:
            content = handle.read()
    except OSError as error:
        raise DatasetError(f"{shown}: cannot be read ({str(error)[:100]})") from None
    if recorded is None or parquet_digest(content, shown) != recorded:
        raise DatasetError(f"{shown}: not the file its dataset's manifest recorded (changed since it was "
                           "published); publish the dataset again")
    try:
        return pq.read_table(io.BytesIO(content), columns=columns)
    except (RuntimeError, OSError, ValueError) as error:  # pyarrow_hotfix refuses a pickled type: RuntimeError
        raise DatasetError(f"{shown}: not a readable Parquet file "
                           f"({(str(error).splitlines() or ['?'])[0][:100]})") from None


def write_json(uri: str, content: dict[str, Any]) -> None:
    """Write a small JSON document atomically (temporary name, then rename)."""
    where = resolve(uri)
    parent = where.path.rsplit("/", 1)[0]
    where.fs.makedirs(parent, exist_ok=True)
    temporary = f"{where.path}.tmp-{uuid.uuid4().hex[:8]}"
    with where.fs.open(temporary, "wb") as handle:
        handle.write(json.dumps(content, indent=2, sort_keys=True).encode())
    if where.fs.exists(where.path):
        where.fs.rm(where.path)
    where.fs.mv(temporary, where.path)


def read_json(uri: str) -> dict[str, Any] | None:
    """A JSON document, or None when it does not exist."""
    where = resolve(uri)
    if not where.fs.exists(where.path):
        return None
    with where.fs.open(where.path, "rb") as handle:
        return _json_object(handle.read(), where.uri)
