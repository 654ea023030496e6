# One image for every Cloudburst service (HDFS and YARN daemons, PostgreSQL, MLflow, Airflow); see docker-compose.yaml.
# Two virtual environments, built by the same script developers run (infra/setup.sh):
#   /opt/cloudburst/venv/training  TensorFlow 2.15 + Horovod (Gloo) + pyspark 3.5: Spark's driver, YARN containers, jobs
#   /opt/cloudburst/venv/airflow   Airflow 3 + providers + MLflow: orchestration and the MLflow server
# Neither is on PATH: services call their env's binaries by full path. Hadoop 3.5.0 is the jar set infra/hadoop/pom.xml
# pins (infra/hadoop/resolve.sh, from Maven Central); PostgreSQL 15 is Debian's (setup.sh installs it).
# Where no image registry is reachable, infra/compose/base-image.sh builds a Debian base from Debian packages:
#   docker build --network host --build-arg BASE_IMAGE=cloudburst-base:bookworm -t cloudburst:local .
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/cloudburst/app

# The environments depend only on these files, so code changes do not rebuild them (TF + Horovod take minutes).
# setup.sh installs the repo with `pip install -e`; an editable install maps the top-level `training`
# package to this folder, so a stub is enough here and the real package arrives with `COPY . .` below.
# The cache mount keeps pip's wheel cache (including the Horovod wheel it compiles) between builds.
# The man1 folder works around openjdk's postinst on slim images, which drop /usr/share/man.
COPY infra/requirements/ infra/requirements/
COPY infra/setup.sh infra/setup.sh
COPY pyproject.toml README.md ./
RUN --mount=type=cache,target=/root/.cache/pip \
    mkdir -p /usr/share/man/man1 training && touch training/__init__.py \
 && CLOUDBURST_VENV_ROOT=/opt/cloudburst/venv bash infra/setup.sh all \
 && rm -rf /var/lib/apt/lists/*

# Hadoop's jars into .cache/hadoop (as on a developer's machine), with Maven's download cache outside the image.
COPY infra/hadoop/ infra/hadoop/
RUN --mount=type=cache,target=/root/.m2 infra/hadoop/resolve.sh

COPY . .

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    CLOUDBURST_TRAINING_PYTHON=/opt/cloudburst/venv/training/bin/python \
    PYSPARK_PYTHON=/opt/cloudburst/venv/training/bin/python \
    HADOOP_CONF_DIR=/opt/cloudburst/hadoop-conf \
    AIRFLOW_HOME=/opt/cloudburst/airflow \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/cloudburst/app/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/cloudburst/app/plugins

# The Hadoop client and daemon configuration for the compose stack's host names (namenode, datanode, ...).
RUN infra/compose/hadoop-conf.sh "$HADOOP_CONF_DIR" && mkdir -p "$AIRFLOW_HOME"
