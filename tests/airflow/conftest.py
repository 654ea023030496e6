"""Airflow tests run in the Airflow environment (`make test` calls its pytest for this folder).

Airflow reads its configuration when first imported, so the settings are made here, before any test module
imports it: a throwaway AIRFLOW_HOME with a SQLite database, this checkout's DAGs and plugins.

CLOUDBURST_TEST_STORE=postgres (infra/run-tests.sh's second pass, with infra/postgres.sh's cluster running and its
`env` exported): the metadata database and the MLflow stores of `mlflow_store_uri` are fresh PostgreSQL databases,
created here and dropped at the end, the way a team's deployment runs Airflow and MLflow.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

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

STORE = os.environ.get("CLOUDBURST_TEST_STORE", "sqlite")
if STORE not in ("sqlite", "postgres"):
    raise pytest.UsageError(f"CLOUDBURST_TEST_STORE must be sqlite or postgres, not {STORE!r}")


def _postgres_server() -> str:
    server = os.environ.get("CLOUDBURST_POSTGRES_URI")
    if not server:
        raise pytest.UsageError("CLOUDBURST_TEST_STORE=postgres needs infra/postgres.sh up and its env exported")
    return server


def _administer(statement: str) -> None:
    import psycopg2

    connection = psycopg2.connect(f"{_postgres_server()}/postgres", connect_timeout=10)
    try:
        connection.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


def _postgres_database(purpose: str) -> str:
    """A new, empty database on infra/postgres.sh's cluster (its SQLAlchemy URI); drop it with _drop_database."""
    name = f"test_{purpose}_{secrets.token_hex(4)}"
    _administer(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg2://{urlsplit(_postgres_server()).netloc}/{name}"


def _drop_database(uri: str) -> None:
    # FORCE: sessions a finished test left open (connection pools) end with the database.
    _administer(f'DROP DATABASE IF EXISTS "{urlsplit(uri).path.lstrip("/")}" WITH (FORCE)')


if STORE == "postgres":
    # Every process that imports this (pytest-xdist's controller too, which runs no test) makes its own database,
    # and drops it when it exits.
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = _postgres_database("airflow")
    atexit.register(_drop_database, os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])


@pytest.fixture(scope="session", autouse=True)
def airflow_database():
    """A fresh metadata database: `airflow dags test` and `dag.test()` need one."""
    from airflow.utils import db

    db.initdb()
    yield


@pytest.fixture
def mlflow_store_uri(tmp_path):
    """The MLflow store of one test: a SQLite file in its folder, or (CLOUDBURST_TEST_STORE=postgres) a new
    PostgreSQL database whose workload experiments keep their artifacts in the test's folder, not under var/."""
    if STORE == "sqlite":
        yield f"sqlite:///{tmp_path / 'mlflow.db'}"
        return
    import mlflow

    from training import workload_registry as workloads

    uri = _postgres_database("mlflow")
    client = mlflow.MlflowClient(uri)
    for name in workloads.names():
        client.create_experiment(name, artifact_location=(tmp_path / "artifacts" / name).as_uri())
    yield uri
    _drop_database(uri)


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
