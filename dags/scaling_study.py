"""
### Scaling study

One run = one study of a workload over a grid: strategies × nodes × workers per node × threads per worker
(× Downpour n_push), with repetitions. The study runs its own **baseline** (1 node × 1 worker, all cores) and a
**ceiling** per strategy and shape — the strategy's own workers with communication switched off — so every ratio
it reports comes from one study: speedup, efficiency, the share of its ceiling a configuration reached, and time
to the target accuracy.

**plan** refuses a grid whose estimated minutes exceed `budget_minutes` (and says the estimate) → the workload's
preparation steps, once → **shard** per distinct worker count → **train** and **evaluate** per configuration
(mapped: the Grid view shows one box each), one at a time through the `cloudburst_cluster` pool → **report**: an
MLflow parent run `study-<name>` with every configuration's run nested under it, `study.csv`, the MLflow table,
the speedup/efficiency, time-to-target and workers-per-node figures, and `recommendation.md`; the recommended
run's model becomes the workload's `champion` in the Model Registry. `cloudburst advise --study <parent run id>`
prints the same table and advice later.
"""

from __future__ import annotations

from cloudburst_study import scaling_study_dag  # the study's wiring (this line also passes Airflow's safe-mode scan)

scaling_study_dag = scaling_study_dag(doc_md=__doc__)
