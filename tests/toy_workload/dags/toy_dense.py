"""
### Toy dense classifier

The whole DAG of a newly added workload: its documentation and one call (an Airflow DAG from the workload's
package, tests/toy_workload/).
"""

from __future__ import annotations

from cloudburst_dags import workload_dag

toy_dense_dag = workload_dag("toy_dense", doc_md=__doc__)
