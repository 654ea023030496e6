# syntax=docker/dockerfile:1
# One image for every Cloudburst service (Spark master/workers, MLflow, Airflow); see docker-compose.yaml.
# Two virtual environments, built by the same script developers run (infra/setup.sh):
#   /opt/cloudburst/venv/training  TensorFlow 2.15 + Horovod (Gloo) + pyspark 3.5: Spark daemons and every job
#   /opt/cloudburst/venv/airflow   Airflow 3 + providers + MLflow: orchestration and the MLflow server
# Neither is on PATH: services call their env's binaries by full path.
FROM python:3.11-slim-bookworm

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# libkrb5-dev: the HDFS provider's gssapi builds from source; g++/cmake/make: Horovod compiles at install.
# The man1 folder works around openjdk's postinst on slim images, which drop /usr/share/man.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      openjdk-17-jre-headless libkrb5-dev g++ cmake make procps curl \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/cloudburst/app

# The environments depend only on these files, so code changes do not rebuild them (TF + Horovod take minutes).
# setup.sh installs the repo with `pip install -e`; an editable install maps the top-level `training`
# package to this folder, so a stub is enough here and the real package arrives with `COPY . .` below.
# The cache mount keeps pip's wheel cache (including the Horovod wheel it compiles) between builds.
COPY infra/requirements/ infra/requirements/
COPY infra/setup.sh infra/setup.sh
COPY pyproject.toml README.md ./
RUN --mount=type=cache,target=/root/.cache/pip \
    mkdir -p training && touch training/__init__.py \
 && CLOUDBURST_VENV_ROOT=/opt/cloudburst/venv bash infra/setup.sh all

COPY . .

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    CLOUDBURST_TRAINING_PYTHON=/opt/cloudburst/venv/training/bin/python \
    PYSPARK_PYTHON=/opt/cloudburst/venv/training/bin/python \
    AIRFLOW_HOME=/opt/cloudburst/airflow \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/cloudburst/app/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/cloudburst/app/plugins

RUN mkdir -p "$AIRFLOW_HOME"
