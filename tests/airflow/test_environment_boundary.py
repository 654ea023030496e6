"""The Airflow environment never needs the training environment's heavy packages: the plugins, the DAGs and the
run specification import and work with TensorFlow, Keras, Horovod, pyarrow and pyspark blocked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

BLOCKED = ("tensorflow", "keras", "horovod", "pyarrow", "pyspark")

PROBE = f"""
import importlib.abc, sys
BLOCKED = {BLOCKED!r}

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is a training-environment package")
        return None

sys.meta_path.insert(0, Blocker())
sys.path[:0] = [{str(REPO_ROOT / "plugins")!r}, {str(REPO_ROOT / "dags")!r}]
import cloudburst_dags, cloudburst_operators, cloudburst_params
from training import contract
from training import workload_registry as workloads
from training.config import RunSpec
for name in workloads.names():
    dag = cloudburst_dags.workload_dag(name)
    spec = RunSpec(workload=name, data_root="/tmp/cloudburst-boundary").validate()
    assert spec.to_args() and [spec.step_output(step) for step in spec.definition.steps]
import mnist_elastic_cnn, kws_densenet_bilstm
print("ok", sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED))
"""


def test_plugins_dags_and_run_specs_import_without_training_packages():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "ok []"


def test_every_package_the_airflow_side_imports_from_training_is_pinned():
    """training/ modules the Airflow side loads use only the standard library, Airflow's own packages and these."""
    pinned = {line.split("==")[0].strip().lower() for line in
              (REPO_ROOT / "infra" / "requirements" / "airflow.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert {"fsspec", "mlflow", "apache-airflow"} <= pinned


def test_spark_steps_get_the_driver_jvm_options_unless_the_environment_sets_its_own(monkeypatch):
    """spark-submit reads SPARK_SUBMIT_OPTS for the driver's JVM: Cloudburst's (training/jobs/spark_session.py,
    checked on a running JVM in tests/test_cluster_settings.py), or the user's, even an empty one."""
    from cloudburst_operators import training_environment

    from training.jobs.spark_session import DRIVER_JAVA_OPTIONS

    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    assert training_environment()["SPARK_SUBMIT_OPTS"] == DRIVER_JAVA_OPTIONS
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "")
    assert training_environment()["SPARK_SUBMIT_OPTS"] == ""
