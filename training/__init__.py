"""Cloudburst: distributed deep-learning training on Hadoop/Spark, orchestrated by Airflow, tracked in MLflow."""

__version__ = "0.1.0"
