"""Airflow tests run in the Airflow environment (`make test` calls its pytest for this folder).

Airflow reads its configuration when first imported, so the settings are made here, before any test module
imports it: a throwaway AIRFLOW_HOME with a SQLite database, this checkout's DAGs and plugins.
"""

from __future__ import annotations

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
})
sys.path.insert(0, str(REPO_ROOT / "plugins"))
sys.path.insert(0, str(REPO_ROOT / "dags"))  # the DAG modules own their defaults (e.g. KWS_DEFAULTS)


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
