"""Airflow tests run in the Airflow environment (`make test` calls its pytest for this folder).

Airflow reads its configuration when first imported, so the settings are made here, before any test module
imports it: a throwaway AIRFLOW_HOME with a SQLite database, this checkout's DAGs and plugins.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = tempfile.mkdtemp(prefix="cloudburst-airflow-tests-")
os.environ.update({
    "AIRFLOW_HOME": AIRFLOW_HOME,
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
    # The NameNode the HDFS sensors ask over WebHDFS (as infra/airflow-env.sh): the real HDFS of `make test`.
    "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps({"conn_type": "webhdfs", "host": "127.0.0.1",
                                                "port": int(os.environ.get("CLOUDBURST_WEBHDFS_PORT", "9870"))}),
    # A second bundle holds the toy workload's DAG (tests/toy_workload/): a workload added as a user would add one.
    "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps([
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(REPO_ROOT / "dags")}},
        {"name": "toy-workload", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(REPO_ROOT / "tests" / "toy_workload" / "dags")}},
    ]),
    # The toy registers through $CLOUDBURST_WORKLOADS; the training environment's processes inherit both.
    "CLOUDBURST_WORKLOADS": "toy_workload",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "tests"), os.environ.get("PYTHONPATH")])),
})
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "plugins"))
sys.path.insert(0, str(REPO_ROOT / "dags"))


@pytest.fixture(scope="session", autouse=True)
def airflow_database():
    """A fresh metadata database: `airflow dags test` and `dag.test()` need one."""
    from airflow.utils import db

    db.initdb()
    yield


@pytest.fixture(scope="session")
def dag_bag():
    """Every DAG in dags/, parsed once; a DAG that fails to import fails every test that uses this."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors == {}
    return bag


@pytest.fixture(scope="session")
def triggering_events():
    """Builds the ``triggering_asset_events`` of a task's context as Airflow's task runner does, from
    (asset name, asset URI, event extra, timestamp) tuples."""
    from airflow.sdk.api.datamodels._generated import AssetReferenceAssetEventDagRun
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    def build(*events):
        return TriggeringAssetEventsAccessor.build([
            AssetEventDagRunReferenceResult(
                asset=AssetReferenceAssetEventDagRun(name=name, uri=uri, extra={}), extra=extra,
                source_task_id="train", source_dag_id="kws_densenet_bilstm", source_run_id="manual__upstream",
                source_map_index=-1, source_aliases=[], timestamp=timestamp)
            for name, uri, extra, timestamp in events])

    return build
