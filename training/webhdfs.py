"""WebHDFS from Python, as Hadoop's own client behaves where it matters: every call is bounded in time, and a
DataNode that does not answer is skipped for another replica.

fsspec's WebHDFS asks the NameNode, which redirects each read or write to one DataNode, and sends the bytes there
with no timeout and no second choice. After a DataNode dies the NameNode keeps naming it until it is declared
dead (tens of seconds on the namespace cluster, ten minutes with Hadoop's defaults), so every read it is named for
would fail, and a DataNode behind a cut link would hang the caller. Here a DataNode that refuses or times out is
reported to the NameNode (WebHDFS's ``excludedatanodes``) and the same request goes to the DataNode it names
instead, as the JVM client fails over between a block's replicas.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
from fsspec.implementations.webhdfs import WebHDFS

log = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0  # a DataNode or NameNode that does not accept within this is treated as gone
READ_SECONDS = 120.0  # silence on an open connection (not the whole transfer) before giving up
MAX_DATANODE_RETRIES = 3  # replication is at most 3 here: one try per replica
# Parameters the NameNode adds to a DataNode's address; the NameNode itself does not take them.
_DATANODE_ONLY = {"namenoderpcaddress", "createflag", "createparent"}


class FailoverSession(requests.Session):
    """A requests session for one NameNode: timeouts on every call; a DataNode that fails to connect or answer is
    excluded and the NameNode asked again."""

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
                if parts.netloc == self.namenode or "/webhdfs/v1" not in parts.path \
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


class FailoverWebHDFS(WebHDFS):
    """fsspec's WebHDFS over a FailoverSession."""

    def _connect(self) -> None:
        super()._connect()
        session = FailoverSession(urlsplit(self.url).netloc)
        session.auth, session.verify, session.cert = self.session.auth, self.session.verify, self.session.cert
        self.session = session
