"""Files written to the real HDFS through training.webhdfs appear whole or not at all, and a DataNode that fails
a write is reported in one line. (A DataNode killed mid-write on a two-host cluster, where the write goes again
to the other one: tests/test_netns_cluster.py.)"""

from __future__ import annotations

import gc
import io
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from training import storage
from training.webhdfs import FailoverWebHDFS

pytestmark = pytest.mark.hadoop


def names(where: storage.Location) -> list[str]:
    """Everything in the directory, hidden attempts included."""
    if not where.fs.exists(where.path):
        return []
    return sorted(path.rsplit("/", 1)[1] for path in where.fs.ls(where.path, detail=False))


def test_numpy_parquet_and_many_small_writes_round_trip_and_leave_only_the_file(hdfs_root):
    where = storage.resolve(hdfs_root)
    weights = np.random.default_rng(0).normal(size=(700, 900)).astype("float32")  # 2.5 MB
    with where.fs.open(f"{where.path}/weights.npy", "wb") as handle:
        np.save(handle, weights)
    table = pa.table({"label": list(range(1000)), "text": [f"row {i}" for i in range(1000)]})
    with where.fs.open(f"{where.path}/rows.parquet", "wb") as handle:
        pq.write_table(table, handle)
    with where.fs.open(f"{where.path}/lines.txt", "wb") as handle:
        for index in range(2000):
            handle.write(f"{index}\n".encode())
    with where.fs.open(f"{where.path}/weights.npy", "rb") as handle:
        assert np.array_equal(np.load(io.BytesIO(handle.read())), weights)
    with where.fs.open(f"{where.path}/rows.parquet", "rb") as handle:
        assert pq.read_table(handle).equals(table)
    assert where.fs.cat_file(f"{where.path}/lines.txt").decode().split() == [str(i) for i in range(2000)]
    assert names(where) == ["lines.txt", "rows.parquet", "weights.npy"]


def test_writing_over_a_file_replaces_it_whole(hdfs_root):
    where = storage.resolve(hdfs_root)
    target = f"{where.path}/state.bin"
    for content in (b"first version, longer than the second", b"second"):
        with where.fs.open(target, "wb") as handle:
            handle.write(content)
        assert where.fs.cat_file(target) == content
    assert names(where) == ["state.bin"]


def test_a_with_block_that_raises_leaves_the_old_file_and_nothing_beside_it(hdfs_root):
    where = storage.resolve(hdfs_root)
    target = f"{where.path}/state.bin"
    with where.fs.open(target, "wb") as handle:
        handle.write(b"complete")
    with pytest.raises(ZeroDivisionError):
        with where.fs.open(target, "wb") as handle:
            handle.write(b"half of the new ")
            raise ZeroDivisionError
    with pytest.raises(ZeroDivisionError):
        with where.fs.open(f"{where.path}/new.bin", "wb") as handle:
            handle.write(b"never finished")
            raise ZeroDivisionError
    assert where.fs.cat_file(target) == b"complete"
    assert names(where) == ["state.bin"]


def test_a_file_never_closed_is_not_written(hdfs_root):
    where = storage.resolve(hdfs_root)
    handle = where.fs.open(f"{where.path}/abandoned.bin", "wb")
    handle.write(b"abandoned")
    del handle
    gc.collect()
    assert names(where) == []


def test_a_datanode_that_never_answers_fails_the_write_in_one_line_and_leaves_nothing(hdfs_root):
    """The only DataNode is unreachable (its address rewritten to a closed port): the file goes again once with it
    excluded, the NameNode has no other, and the error names both; no attempt is left behind."""
    real = storage.resolve(hdfs_root)
    parsed = urlsplit(real.fs.url)

    def unreachable(location: str) -> str:
        if location.startswith(real.fs.url):  # the NameNode: as it is
            return location
        return urlunsplit(("http", "127.0.0.1:1", *urlsplit(location)[2:]))

    fs = FailoverWebHDFS(host=parsed.hostname, port=parsed.port, user=real.fs.user, data_proxy=unreachable,
                         skip_instance_cache=True)
    with pytest.raises(OSError) as failure:
        with fs.open(f"{real.path}/lost.bin", "wb") as handle:
            handle.write(b"nowhere to go")
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith(f"HDFS could not take {real.path}/lost.bin: DataNode 127.0.0.1: ConnectionError")
    assert "the NameNode named no other DataNode" in message
    assert names(real) == []
