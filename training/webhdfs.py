"""WebHDFS from Python, as Hadoop's own client behaves where it matters: every call is bounded in time, a
DataNode that does not answer is skipped for another one, and a file appears whole or not at all.

fsspec's WebHDFS asks the NameNode, which redirects each read or write to one DataNode, and sends the bytes there
with no timeout and no second choice. After a DataNode dies the NameNode keeps naming it until it is declared
dead (tens of seconds on the namespace cluster, ten minutes with Hadoop's defaults), so every read or write it is
named for would fail, and a DataNode behind a cut link would hang the caller.

Reads: a DataNode that refuses or times out is reported to the NameNode (WebHDFS's ``excludedatanodes``) and the
same request goes to the DataNode it names instead, as the JVM client fails over between a block's replicas.

Writes cannot simply be sent again: a DataNode that dies while writing leaves the file open under its lease, and
HDFS refuses another writer for that name until the lease expires (a minute). So a file opened for writing is
collected on this side and sent in one request, under a fresh hidden name, renamed over its path when complete;
a DataNode that fails mid-way costs one more attempt under another name, excluding it.
"""

from __future__ import annotations

import io
import logging
import tempfile
import uuid
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
from fsspec.implementations.webhdfs import WebHDFS

log = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0  # a DataNode or NameNode that does not accept within this is treated as gone
READ_SECONDS = 120.0  # silence on an open connection (not the whole transfer) before giving up
MAX_DATANODE_RETRIES = 3  # replication is at most 3 here: one try per replica
# DataNode answers that another DataNode would answer the same way: sending the file again cannot help.
_FINAL_EXCEPTIONS = {"AccessControlException", "SecurityException", "FileNotFoundException",
                     "FileAlreadyExistsException", "ParentNotDirectoryException", "IllegalArgumentException",
                     "UnsupportedOperationException", "DSQuotaExceededException", "NSQuotaExceededException"}
# Parameters the NameNode adds to a DataNode's address; the NameNode itself does not take them.
_DATANODE_ONLY = {"namenoderpcaddress", "createflag", "createparent"}


class FailoverSession(requests.Session):
    """A requests session for one NameNode: timeouts on every call; a DataNode that fails to connect or answer a
    read is excluded and the NameNode asked again. (Writes are retried whole by FailoverWebHDFS.)"""

    def __init__(self, namenode: str) -> None:
        super().__init__()
        self.namenode = namenode  # host:port of the NameNode's HTTP server

    def send(self, request: requests.PreparedRequest, **keywords: Any) -> requests.Response:
        if keywords.get("timeout") is None:
            keywords["timeout"] = (CONNECT_SECONDS, READ_SECONDS)
        excluded: list[str] = []
        while True:
            try:
                return super().send(request, **keywords)
            except (requests.ConnectionError, requests.Timeout) as error:
                parts = urlsplit(request.url)
                if request.method != "GET" or parts.netloc == self.namenode or "/webhdfs/v1" not in parts.path \
                        or len(excluded) >= MAX_DATANODE_RETRIES:
                    raise
                excluded.append(parts.hostname)
                log.warning("WebHDFS: DataNode %s did not answer (%s); asking the NameNode for another replica",
                            parts.netloc, type(error).__name__)
                request = self._redirected(request, excluded, keywords)

    def _redirected(self, request: requests.PreparedRequest, excluded: list[str],
                    keywords: dict[str, Any]) -> requests.PreparedRequest:
        """The same request, sent where the NameNode now redirects it with these DataNodes excluded."""
        parts = urlsplit(request.url)
        query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
                 if name.lower() not in _DATANODE_ONLY and name != "excludedatanodes"]
        query.append(("excludedatanodes", ",".join(excluded)))
        asking = requests.Request(request.method, urlunsplit(("http", self.namenode, parts.path, urlencode(query),
                                                              ""))).prepare()
        answer = super().send(asking, **{**keywords, "allow_redirects": False})
        location = answer.headers.get("Location")
        if answer.status_code not in (301, 302, 303, 307, 308) or not location:
            answer.raise_for_status()
            raise requests.ConnectionError(f"the NameNode named no other DataNode for {parts.path} "
                                           f"(excluded: {', '.join(excluded)})")
        again = request.copy()
        again.prepare_url(location, None)
        return again


class DataNodeWriteError(OSError):
    """A DataNode failed to take a file: it did not answer, or answered with an error."""

    def __init__(self, datanode: str, reason: str, final: bool) -> None:
        super().__init__(f"DataNode {datanode}: {reason}")
        self.datanode, self.reason, self.final = datanode, reason, final


def _remote_exception(response: requests.Response) -> tuple[str, str]:
    """(Java exception class, message) of a WebHDFS error answer; the HTTP status when it carries none."""
    try:
        remote = response.json()["RemoteException"]
        return str(remote["exception"]), str(remote["message"]).split("\n", 1)[0]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}", response.reason or ""


class FailoverWebHDFS(WebHDFS):
    """fsspec's WebHDFS over a FailoverSession, whose files opened for writing are sent whole (WholeFileUpload)."""

    def _connect(self) -> None:
        super()._connect()
        session = FailoverSession(urlsplit(self.url).netloc)
        session.auth, session.verify, session.cert = self.session.auth, self.session.verify, self.session.cert
        self.session = session

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              replication: int | None = None, permissions: int | None = None, **keywords: Any) -> IO[bytes]:
        if "w" in mode and autocommit:
            return WholeFileUpload(self, self._strip_protocol(path))
        return super()._open(path, mode=mode, block_size=block_size, autocommit=autocommit,
                             replication=replication, permissions=permissions, **keywords)

    def write_whole(self, path: str, content: IO[bytes]) -> None:
        """``content`` (from its start) to ``path``, replacing what is there: sent in one request under a hidden
        name beside it, then renamed over it; after a DataNode failure, sent again under another name with that
        DataNode excluded."""
        parent, name = path.rstrip("/").rsplit("/", 1)
        excluded: list[str] = []
        failures: list[str] = []
        while True:
            temporary = f"{parent}/.{name}.{uuid.uuid4().hex[:12]}.writing"
            content.seek(0)
            try:
                self._create(temporary, content, excluded)
                break
            except DataNodeWriteError as failure:
                self._forget(temporary)
                failures.append(str(failure))
                if failure.final or len(excluded) >= MAX_DATANODE_RETRIES:
                    raise OSError(f"HDFS could not take {path}: {'; '.join(failures)}") from None
                excluded.append(failure.datanode)
                log.warning("WebHDFS: writing %s: DataNode %s failed (%s); sending the file again under a new "
                            "name", path, failure.datanode, failure.reason)
            except RuntimeError as refused:  # the NameNode's answer (fsspec raises its RemoteException so)
                if not excluded:
                    raise
                raise OSError(f"HDFS could not take {path}: {'; '.join(failures)}; and then the NameNode "
                              f"named no other DataNode ({str(refused).splitlines()[0]})") from None
        self._call("RENAME", "put", temporary, destination=path, renameoptions="OVERWRITE")

    def _create(self, temporary: str, content: IO[bytes], excluded: list[str]) -> None:
        extra = {"excludedatanodes": ",".join(excluded)} if excluded else {}
        asked = self._call("CREATE", "put", temporary, redirect=False, overwrite="false", **extra)
        location = self._apply_proxy(asked.headers["Location"])
        datanode = urlsplit(location).hostname or location
        try:
            answer = self.session.put(location, data=content, headers={"content-type": "application/octet-stream"})
        except (requests.ConnectionError, requests.Timeout) as error:
            raise DataNodeWriteError(datanode, type(error).__name__, final=False) from None
        if answer.status_code >= 400:
            exception, message = _remote_exception(answer)
            raise DataNodeWriteError(datanode, f"{exception}: {message}", final=exception in _FINAL_EXCEPTIONS)

    def _forget(self, temporary: str) -> None:
        """Delete a failed attempt (HDFS deletes a file still open under a dead writer's lease too)."""
        try:
            self._call("DELETE", "delete", temporary, recursive="false")
        except (OSError, RuntimeError, requests.RequestException) as error:
            log.warning("WebHDFS: could not delete the failed attempt %s (%s)", temporary, error)


class WholeFileUpload(io.BufferedIOBase):
    """A file opened for writing on HDFS. Its bytes collect in a local temporary file and go to HDFS when it is
    closed (FailoverWebHDFS.write_whole): all of it or, when the ``with`` block raised or it was never closed,
    nothing."""

    def __init__(self, fs: FailoverWebHDFS, path: str) -> None:
        super().__init__()
        self.fs, self.path = fs, path
        self.spool = tempfile.TemporaryFile(prefix="cloudburst-hdfs-")

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"write to closed file {self.path}")
        return self.spool.write(data)

    def tell(self) -> int:
        return self.spool.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.spool.seek(offset, whence)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.spool.flush()
            self.fs.write_whole(self.path, self.spool)
        finally:
            self.discard()

    def discard(self) -> None:
        """Close without sending anything."""
        if not self.spool.closed:
            self.spool.close()
        super().close()

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        if not self.closed:  # never closed: an unfinished file is not published
            self.discard()
