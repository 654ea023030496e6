"""Where Airflow itself touches HDFS: two sensors on the Apache HDFS provider's ``WebHdfsSensor`` and
``WebHDFSHook``, so waiting happens in Airflow (visible, bounded, retried) and not inside a Spark job.

* :class:`LandingZoneSensor` (``wait_for_raw_data``, right after validate_run): when the run's data source is an
  ``hdfs://`` URI, waits until that path exists on HDFS — the raw data has landed. Any other source (empty = the
  workload's offline default, a local path, an http(s) URL, ``synthetic``) has nothing to wait for.
* :class:`ManifestSensor` (``check_shards``, right before train): the shards train reads (or ``existing_shards``)
  are complete only once their ``_manifest.json`` exists (training.storage writes it last, then renames the
  dataset into place), so training never starts on a half-published dataset.

Airflow talks to HDFS through the ``webhdfs_default`` connection (infra/airflow-env.sh sets it to the NameNode's
HTTP port). The connection is the NameNode Airflow asks, whatever host an ``hdfs://`` URI names: the URI's host is
what Spark uses, and when the two differ both are logged. A NameNode that does not answer fails the poke with
both named (the task's retries then apply) rather than reading as "not there yet".
"""

from __future__ import annotations

import datetime
import os
from typing import Any
from urllib.parse import unquote, urlparse

from airflow.providers.apache.hdfs.sensors.web_hdfs import WebHdfsSensor
from cloudburst_operators import run_spec

from training import storage

WAIT_FOR_RAW_DATA = "wait_for_raw_data"
CHECK_SHARDS = "check_shards"


class _CloudburstHdfsSensor(WebHdfsSensor):
    """A WebHdfsSensor whose path comes from the DAG run's settings (``run_spec``), known only at poke time."""

    def __init__(self, *, workload: str, webhdfs_conn_id: str = "webhdfs_default", **kwargs: Any) -> None:
        # filepath is set by each poke (the provider's template field; shown in the task's rendered fields).
        super().__init__(filepath="", webhdfs_conn_id=webhdfs_conn_id, **kwargs)
        self.workload = workload

    def exists_on_hdfs(self, uri: str) -> bool:
        """Whether the path of ``uri`` (hdfs://host:port/path) exists, asked through the provider's hook."""
        from airflow.providers.apache.hdfs.hooks.webhdfs import AirflowWebHDFSHookException, WebHDFSHook

        hook = WebHDFSHook(webhdfs_conn_id=self.webhdfs_conn_id)
        connection = hook.get_connection(self.webhdfs_conn_id)
        talks_to = f"{connection.host}:{connection.port}"
        parsed = urlparse(uri)
        self.filepath = parsed.path or "/"
        namenodes = {host.strip().lower() for host in (connection.host or "").split(",")}
        if (parsed.hostname or "").lower() not in namenodes:
            self.log.warning("%s names NameNode %s, but Airflow asks HDFS through connection %r at %s: checking "
                             "%s there", uri, parsed.hostname, self.webhdfs_conn_id, talks_to, self.filepath)
        else:
            self.log.info("checking %s on HDFS through connection %r (WebHDFS at %s)", self.filepath,
                          self.webhdfs_conn_id, talks_to)
        try:
            return hook.check_for_path(self.filepath)
        except AirflowWebHDFSHookException as error:
            raise AirflowWebHDFSHookException(
                f"cannot check {uri}: no NameNode answers WebHDFS at {talks_to} (connection "
                f"{self.webhdfs_conn_id!r}: {error}); is HDFS up, and is the connection's port its HTTP port?"
            ) from error


class LandingZoneSensor(_CloudburstHdfsSensor):
    """Wait until the run's ``hdfs://`` data source exists; other sources pass at once.

    Reschedule mode: between pokes the task gives its worker slot back (the wait may be hours). ``dag.test()``
    handles rescheduled sensors (its loop runs them again once the reschedule date has passed), so no poke-mode
    fallback is needed there.
    """

    def __init__(self, *, workload: str, task_id: str = WAIT_FOR_RAW_DATA,
                 poke_interval: datetime.timedelta | float = 30,
                 timeout: datetime.timedelta | float = datetime.timedelta(hours=6),
                 mode: str = "reschedule", **kwargs: Any) -> None:
        super().__init__(workload=workload, task_id=task_id, poke_interval=poke_interval, timeout=timeout,
                         mode=mode, **kwargs)

    def poke(self, context: Any) -> bool:
        spec = run_spec(context, self.workload)
        source = spec.resolved_data_source()
        if urlparse(source).scheme.lower() != "hdfs":
            what = "" if spec.data_source else " (the workload's offline default)"
            self.log.info("data source %r%s is not on HDFS: nothing to wait for", source, what)
            return True
        self.log.info("waiting for the raw data at %s to land on HDFS", source)
        found = self.exists_on_hdfs(source)
        if not found:
            self.log.info("%s does not exist yet", source)
        return found


class ManifestSensor(_CloudburstHdfsSensor):
    """Check that the shards train will read (``existing_shards`` if given) are published: their manifest exists.

    On HDFS through the provider's hook, on file:// with ``os.path.exists``. Short and in poke mode: the shard
    task published them moments ago, this only guards against training on a half-published dataset.
    """

    def __init__(self, *, workload: str, branch: str = "", task_id: str = CHECK_SHARDS,
                 poke_interval: datetime.timedelta | float = 10,
                 timeout: datetime.timedelta | float = datetime.timedelta(minutes=10),
                 mode: str = "poke", **kwargs: Any) -> None:
        super().__init__(workload=workload, task_id=task_id, poke_interval=poke_interval, timeout=timeout,
                         mode=mode, **kwargs)
        self.branch = branch

    def poke(self, context: Any) -> bool:
        spec = run_spec(context, self.workload, self.branch)
        shards = storage.to_uri(spec.shards_uri())
        manifest = storage.join(shards, storage.MANIFEST_NAME)
        which = "existing shards" if spec.existing_shards else "shards"
        self.log.info("checking that the %s at %s are published (%s)", which, shards, storage.MANIFEST_NAME)
        parsed = urlparse(manifest)
        if parsed.scheme == "hdfs":
            found = self.exists_on_hdfs(manifest)
        else:  # file://
            self.filepath = unquote(parsed.path)
            found = os.path.exists(self.filepath)
        if not found:
            self.log.info("no %s at %s yet: the dataset is missing or not completely published", storage.MANIFEST_NAME,
                          shards)
        return found
