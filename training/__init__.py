"""Cloudburst: distributed deep-learning training on Hadoop/Spark, orchestrated by Airflow, tracked in MLflow."""

from pathlib import Path

__version__ = "0.1.0"
REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout: default data and stores
