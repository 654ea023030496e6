# Cloudburst — `make demo` and `make test` do all the set-up themselves (see README.md).
SHELL := /bin/bash
VENV ?= .venv
TRAINING_BIN := $(VENV)/training/bin
AIRFLOW_BIN := $(VENV)/airflow/bin
PYTEST_ARGS ?=
TEST_WORKERS ?= 2
# STORE=postgres: Airflow's metadata and MLflow's store in this checkout's own PostgreSQL (infra/postgres.sh) for
# demo, study, airflow-up and mlflow-ui; SQLite files under var/ are the default.
ifdef STORE
export CLOUDBURST_STORE := $(STORE)
endif

.PHONY: help setup setup-training test test-fast lint demo demo-full demo-kws demo-kws-full demo-sv demo-cluster study bench bench-strategies bench-cluster bench-kws bench-kws-budget bench-kws-generalisation bench-kws-leave-one-engine-out bench-kws-foreign-engine bench-sv bench-sv-transfer bench-sv-trials bench-sv-scaling bench-roofline docs docs-serve record-results clean airflow-up airflow-down mlflow-ui postgres-up postgres-down postgres-status

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

setup:  ## build both Python environments and install Debian packages (idempotent)
	infra/setup.sh all

setup-training:  ## build only the training environment
	infra/setup.sh training

test: setup  ## lint, then every test: training env (Spark, Horovod, MLflow, real HDFS + YARN), then Airflow env
	PYTEST_ARGS="$(PYTEST_ARGS)" TEST_WORKERS="$(TEST_WORKERS)" infra/run-tests.sh

test-fast: setup-training  ## tests without the slow Spark/Horovod ones
	$(TRAINING_BIN)/python -m pytest --ignore=tests/airflow -m "not spark" $(PYTEST_ARGS)

docs: setup  ## the docs site into var/site: figures from docs/results, the settings reference, MkDocs (strict)
	$(TRAINING_BIN)/python infra/docs/render.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/docs/bin/mkdocs build --strict

docs-serve: docs  ## the docs site at http://127.0.0.1:8000 (Ctrl-C stops it)
	NO_MKDOCS_2_WARNING=1 $(VENV)/docs/bin/mkdocs serve --dev-addr 127.0.0.1:8000

record-results: setup-training  ## copy the last make test's and demos' measurements into docs/results (then make docs)
	$(TRAINING_BIN)/python infra/docs/record.py tests
	$(TRAINING_BIN)/python infra/docs/record.py demos

lint:  ## ruff
	$(TRAINING_BIN)/ruff check .

demo: setup  ## the mnist_elastic_cnn DAG end to end on the full MNIST (airflow dags test), then a summary
	infra/demo.sh

demo-full: setup  ## the mnist_elastic_cnn DAG with the full preset (deeper CNN with batch norm, half of each batch deformed, rotated and scaled afresh, 70 epochs, cosine decay), 1x1 (measured 99.57 % test; about 30 min on 2 idle cores)
	DEMO_PRESET=full DEMO_CONFIGS=$${DEMO_CONFIGS:-1x1} infra/demo.sh

demo-kws: setup  ## the kws_densenet_bilstm DAG on a synthetic Speech Commands corpus of 200 speakers, then a summary
	infra/demo.sh kws_densenet_bilstm

demo-kws-full: setup  ## the kws_densenet_bilstm DAG with the full preset (1,000 synthetic speakers, 40 epochs, cosine decay, 30 % _unknown_), 1x2 (about an hour on 2 idle cores)
	DEMO_PRESET=full DEMO_CONFIGS=$${DEMO_CONFIGS:-1x2} infra/demo.sh kws_densenet_bilstm

demo-sv: setup  ## the speaker_verification DAG (models A and B, fused) on a synthetic corpus of 300 speakers, then a summary
	infra/demo.sh speaker_verification

demo-cluster: setup hadoop-up  ## the mnist_elastic_cnn DAG with its data on the real HDFS and Spark on YARN (1x2)
	DEMO_CLUSTER=1 infra/demo.sh

study: setup  ## the scaling_study DAG's default grid (horovod + downpour, 1x1 vs 1x2, n_push 4/16, ≤45 min), then its table and advice
	infra/study.sh

STUDY_NODES ?= 2
study-cluster: setup  ## the study on the namespace cluster (root; STUDY_NODES hosts of 1 core each, up if needed): Horovod vs Downpour at 10gbit, 1gbit, 100mbit; STUDY_CONF overrides
	infra/study.sh --cluster $(STUDY_NODES)

airflow-up: setup  ## Airflow UI + scheduler + dag-processor in the background (prints URL and login)
	infra/airflow-services.sh up

airflow-down:  ## stop them
	infra/airflow-services.sh down

mlflow-ui: setup  ## MLflow UI in the foreground (Ctrl-C stops it)
	infra/mlflow-ui.sh

postgres-up: setup  ## this checkout's PostgreSQL for Airflow and MLflow (var/postgres, 127.0.0.1:5433); STORE=postgres uses it
	infra/postgres.sh up

postgres-down:  ## stop it
	infra/postgres.sh down

postgres-status:  ## one line
	infra/postgres.sh status

# Single-node Apache Hadoop 3.5 (HDFS + YARN) from Maven Central, on 127.0.0.1 only (infra/hadoop/).
.PHONY: hadoop hadoop-up hadoop-down hadoop-status
hadoop:  ## resolve the pinned Hadoop jars from Maven Central into .cache/hadoop (once; needs mvn)
	infra/hadoop/resolve.sh

hadoop-up: setup-training  ## HDFS + YARN as four background JVMs, Spark's jars on HDFS (prints URLs and fs.defaultFS)
	infra/hadoop/hadoop.sh up

hadoop-down:  ## stop the four Hadoop daemons (SIGTERM, then SIGKILL after 30 s)
	infra/hadoop/hadoop.sh down

hadoop-status:  ## one line per Hadoop daemon, HDFS safe mode, live NodeManagers
	infra/hadoop/hadoop.sh status

# The compose stack (docker-compose.yaml, infra/compose/): every service from the project's own image.
.PHONY: compose-test
compose-test:  ## build the image, bring the compose stack up, run the MNIST DAG through Airflow's REST API, check its MLflow run, bring it down (a Docker engine, or root on Debian: it installs and runs Debian's own; ~2.5 min with a built image, ~7 min more for a cold build)
	infra/compose/test.sh

# Several hosts on this machine: Hadoop in network namespaces with shaped links (infra/cluster/netns.sh; root).
.PHONY: cluster-up cluster-down cluster-wipe cluster-status study-cluster
NODES ?= 3
LINK ?= 1gbit
cluster-up: setup-training  ## a master and NODES worker hosts (default 3) in network namespaces, links shaped to LINK (default 1gbit)
	infra/cluster/netns.sh up $(NODES) $(LINK)

cluster-down:  ## stop the cluster's daemons, remove its namespaces, links, bridge and cgroups (idempotent)
	infra/cluster/netns.sh down

cluster-wipe:  ## forget the cluster's data (HDFS, logs, YARN state) so the next cluster-up starts a new HDFS; refused while up
	infra/cluster/netns.sh wipe

cluster-status:  ## hosts, addresses, daemons, link rates, CPU quotas, live DataNodes and NodeManagers
	infra/cluster/netns.sh status

bench: setup-training  ## elastic augmentation vs SciPy, the data pipeline, Horovod scaling, strategies vs Elephas
	$(TRAINING_BIN)/python bench/elastic_augmentation.py
	$(TRAINING_BIN)/python bench/data_pipeline.py
	$(TRAINING_BIN)/python bench/scaling.py
	$(TRAINING_BIN)/python bench/strategies.py

bench-roofline: setup-training  ## each workload's training step against this machine's fp32/bf16 matmul peak, float32 and mixed_bfloat16 side by side, and where the slowest step goes (~7 min)
	$(TRAINING_BIN)/python bench/roofline.py

bench-kws: setup-training  ## keyword spotting: Horovod 1x1, 1x2, Keras 2 threads and the ceiling side by side (~12 min)
	$(TRAINING_BIN)/python bench/scaling.py --workload kws_densenet_bilstm

bench-kws-budget: setup-training  ## keyword spotting: distinct data (4x the speakers) or more passes (4x the epochs) for the same examples seen, side by side on one core each (~80 min)
	$(TRAINING_BIN)/python bench/kws_budget.py

bench-kws-generalisation: setup-training  ## keyword spotting on held-out voice families: leave one family out, online augmentation on vs off (~1 h)
	$(TRAINING_BIN)/python bench/kws_generalisation.py

bench-kws-leave-one-engine-out: setup-training  ## keyword spotting: bench-kws-generalisation's leave-one-engine-out half alone, the workload's defaults (~40 min)
	$(TRAINING_BIN)/python bench/kws_generalisation.py --skip-augmentation

bench-kws-foreign-engine: setup-training  ## keyword spotting checked on SAM, a synthesiser the corpus never uses: the runs of make demo-kws-full and make demo-kws (1 min)
	$(TRAINING_BIN)/python bench/kws_foreign_engine.py

bench-sv: setup-training  ## speaker verification: embedding models A and B, their fusion, transfer from a keyword spotter (~25 min)
	$(TRAINING_BIN)/python bench/speaker_verification.py

bench-sv-transfer: setup-training  ## speaker model A: transfer from a trunk pretrained on a separate pool of 500 synthetic speakers (another seed), against scratch and a pooled-data control with as many examples (~80 min)
	$(TRAINING_BIN)/python bench/sv_transfer.py

bench-sv-trials: setup-training  ## speaker verification: trials per condition for corpus sizes, counted without synthesising (3 s)
	$(TRAINING_BIN)/python bench/sv_trial_counts.py

bench-sv-scaling: setup-training  ## speaker models A and B: Horovod 1x1, 1x2, Keras 2 threads and the ceiling; time to 60 % speaker accuracy and to a development EER (~30 min)
	$(TRAINING_BIN)/python bench/scaling.py --workload speaker_verification --embedding-model model_a --target 0.6
	$(TRAINING_BIN)/python bench/scaling.py --workload speaker_verification --embedding-model model_b --target 0.6

bench-strategies: setup-training  ## Downpour, averaging, Horovod, Keras, Elephas and the ceiling side by side (~35 min)
	$(TRAINING_BIN)/python bench/strategies.py

bench-cluster: setup-training  ## MNIST on 3 namespace hosts at 10gbit, 1gbit, 100mbit: Horovod, Downpour n_push 1/4/16, averaging vs 1x1 and each strategy's own ceiling (root)
	$(TRAINING_BIN)/python bench/cluster_links.py

clean:  ## stop Hadoop and PostgreSQL, remove datasets and stores under var/ (environments and .cache stay)
	infra/hadoop/hadoop.sh down
	infra/postgres.sh down
	-infra/cluster/netns.sh down
	rm -rf var spark-warehouse metastore_db derby.log
