# Cloudburst — `make demo` and `make test` do all the set-up themselves (see README.md).
SHELL := /bin/bash
VENV ?= .venv
TRAINING_BIN := $(VENV)/training/bin
AIRFLOW_BIN := $(VENV)/airflow/bin
PYTEST_ARGS ?=

.PHONY: help setup setup-training test test-fast lint demo bench clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

setup:  ## build both Python environments and install Debian packages (idempotent)
	infra/setup.sh all

setup-training:  ## build only the training environment
	infra/setup.sh training

test: setup  ## lint, then the whole test suite (real Spark, real stores)
	$(TRAINING_BIN)/ruff check .
	$(TRAINING_BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: setup-training  ## tests without the slow Spark ones
	$(TRAINING_BIN)/python -m pytest -m "not spark" $(PYTEST_ARGS)

lint:  ## ruff
	$(TRAINING_BIN)/ruff check .

demo: setup  ## run the data half of the pipeline on the full MNIST (training arrives with the next issue)
	infra/demo.sh

bench: setup-training  ## elastic augmentation vs the SciPy baseline, and the data pipeline's wall time
	$(TRAINING_BIN)/python bench/elastic_augmentation.py
	$(TRAINING_BIN)/python bench/data_pipeline.py

clean:  ## remove datasets and stores under var/ (environments stay)
	rm -rf var spark-warehouse metastore_db derby.log
