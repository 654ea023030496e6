"""docker-compose.yaml without an engine: every service from the project's image, Hadoop's own daemons and Spark on
YARN (no apache/hadoop image, no Spark standalone), names and ports that agree with the rendered Hadoop config, and
the host-network override covering every service. With Docker's v1 client installed, its own `config -q` too."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yaml"
HOST_NETWORK_FILE = REPO_ROOT / "infra" / "compose" / "host-network.yaml"
SPARK_DEFAULTS = REPO_ROOT / "infra" / "compose" / "spark-conf" / "spark-defaults.conf"
HADOOP_DAEMONS = ("namenode", "datanode", "resourcemanager", "nodemanager")
IMAGE = "cloudburst:local"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    return load(COMPOSE_FILE)["services"]


def words(service: dict) -> str:
    """A service's command, environment and health check as one text, for looking up names and ports."""
    return yaml.safe_dump({key: service.get(key) for key in ("command", "environment", "healthcheck")})


@pytest.fixture(scope="module")
def hadoop_conf(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("hadoop-conf")
    subprocess.run([str(REPO_ROOT / "infra" / "compose" / "hadoop-conf.sh"), str(out)], check=True,
                   capture_output=True)
    return "\n".join(path.read_text() for path in sorted(out.glob("*.xml")))


def test_every_service_runs_the_projects_own_image(services):
    for name, service in services.items():
        assert service.get("image") == IMAGE, name
        assert service.get("build") == ".", name


def test_no_apache_hadoop_image_and_no_spark_standalone(services):
    text = COMPOSE_FILE.read_text()
    assert "apache/hadoop" not in text
    assert "spark://" not in text and "deploy.master" not in text and "deploy.worker" not in text
    assert re.search(r"^spark\.master\s+yarn$", SPARK_DEFAULTS.read_text(), re.MULTILINE)
    assert '"host":"yarn"' in services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]


def test_each_hadoop_daemon_is_a_service_running_its_own_main_class(services):
    for daemon in HADOOP_DAEMONS:
        assert services[daemon]["command"][-2:] == ["/opt/cloudburst/app/infra/compose/hadoop-daemon.sh", daemon]


def test_airflow_and_mlflow_keep_their_stores_in_postgresql(services):
    for name in ("airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor"):
        environment = services[name]["environment"]
        assert environment["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://"), name
        assert environment["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
    mlflow = " ".join(services["mlflow"]["command"])
    # psycopg2 named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3's.
    assert '--backend-store-uri "postgresql+psycopg2://' in mlflow and "@postgres:5432/mlflow" in mlflow
    assert "--serve-artifacts" in mlflow


def test_every_host_a_service_names_is_a_service(services):
    for name, service in services.items():
        for host in re.findall(r"(?:https?|hdfs|postgresql\+psycopg2)://(?:[^@/\s]*@)?([a-z][a-z0-9-]*)[:/]",
                               words(service)):
            if host != "localhost":
                assert host in services, f"{name} names {host}, which is no service"
    assert services["airflow-scheduler"]["environment"]["CLOUDBURST_SPARK_DRIVER_HOST"] == "airflow-scheduler"


def test_published_ports_are_the_ports_the_services_bind(services, hadoop_conf):
    for name, service in services.items():
        for mapping in service.get("ports", []):
            published, target = mapping.split(":")
            assert published == target, f"{name}: {mapping} (host-network mode has no port mapping)"
            if name in HADOOP_DAEMONS:
                assert f"<value>{name}:{target}</value>" in hadoop_conf, f"{name} publishes {target}, binds elsewhere"
            else:
                assert f"{name}:{target}" in words(service) or f"--port {target}" in words(service), (name, target)


def test_hadoop_config_names_services_and_never_loopback(hadoop_conf):
    assert "<value>hdfs://namenode:8020</value>" in hadoop_conf
    values = re.findall(r"<value>([^<]*)</value>", hadoop_conf)
    assert not [value for value in values if "127.0.0.1" in value]


def test_the_host_network_override_covers_every_service(services):
    override = load(HOST_NETWORK_FILE)["services"]
    assert set(override) == set(services)
    for name, service in override.items():
        assert service["network_mode"] == "host", name
        assert {entry.split(":")[0] for entry in service["extra_hosts"]} == set(services), name
        assert all(entry.endswith(":127.0.0.1") for entry in service["extra_hosts"]), name


def test_the_dockerfile_takes_its_base_image_as_an_argument_and_pulls_no_frontend():
    lines = (REPO_ROOT / "Dockerfile").read_text().splitlines()
    assert not any(line.startswith("# syntax=") for line in lines)  # BuildKit would pull that frontend image
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in lines
    assert lines.index("ARG BASE_IMAGE=python:3.11-slim-bookworm") < lines.index("FROM ${BASE_IMAGE}")


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Docker's docker-compose (v1) is not installed")
@pytest.mark.parametrize("files", [["docker-compose.yaml"], ["docker-compose.yaml", "infra/compose/host-network.yaml"]])
def test_docker_compose_accepts_the_files(files):
    arguments = [argument for path in files for argument in ("-f", path)]
    result = subprocess.run(["docker-compose", *arguments, "config", "-q"], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
