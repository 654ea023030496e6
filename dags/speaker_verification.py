"""
### Speaker verification: two embedding models, fused

Two speaker-embedding models of similar size trained in parallel on Spark as speaker classifiers (additive angular
margin softmax, margin ramped 0 → 0.2, scale 30) — **A**: the keyword spotter's DenseNet-BiLSTM trunk on log-mel;
**B**: an x-vector TDNN on MFCC — then scored and fused on trials of speakers neither model heard. Runs on Speech
Commands (a directory, a `.tar.gz` or a URL) or, by default, on a corpus synthesised offline (300 voices of 69
voice families).

**ingest** (speakers as labels; sv_train / sv_dev / sv_eval by Speech Commands' sha1 rule on the speaker id,
held-out voice families to sv_eval; trial lists — same word, different word, hard = same family — made once with
their seed) → for each model, side by side: **features** → **shard** → **check_shards** → **train** (the chosen
strategy, nodes × workers_per_node) → **score** (embeddings of every clip as Parquet; each model's MLflow run gets
its embedder) → **fuse** (S-norm with an sv_train cohort; logistic-regression fusion and calibration trained on
sv_dev; the system `cloudburst verify` loads) → **evaluate** (EER, minDCF at 0.01/0.05 with thresholds and
bootstrap intervals over speakers, actual DCF, Cllr, per model and fused, per condition; DET curves) — in the
MLflow experiment `speaker_verification`.

Every step publishes atomically and is idempotent, so retries are safe. Triggered by hand, or — once unpaused —
by the keyword-spotting DAG's model asset (`kws_densenet_bilstm_model`): such a run starts model A from the keyword
spotter that published it (`transfer_from` = its run directory). Train that spotter with
`training_speakers=sv_train` and the same `held_out_families`: a spotter that heard an sv_dev or sv_eval speaker
is refused before any training starts. `transfer_from` may also name a speaker model A pretrained on a separate
pool of speakers (its `model_a` run directory, e.g. a run on the synthetic corpus of another seed): its trunk and
embedding layer are copied, then every layer fine-tunes.
"""

from __future__ import annotations

from cloudburst_dags import workload_dag  # an Airflow DAG per workload (this line also passes Airflow's safe-mode scan)

speaker_verification_dag = workload_dag("speaker_verification", doc_md=__doc__)
