"""
### CSV classifier

Your own tabular data: a CSV file (a header, numeric feature columns, a label column) → a small dense classifier,
under any strategy. Set **Data source** to the CSV's path and **Label column** to its label's column; empty, it
trains on the bundled sample (the UCI Wine data). ingest checks the file (one line per problem) and splits it by
class with the seed: 60 % train, 20 % validation, 20 % test.

From the `cloudburst-csv-classifier` distribution (examples/csv_classifier/); Airflow finds this file through a DAG
bundle pointing at this folder, or copied into Cloudburst's dags/ (the word "Airflow" here also passes Airflow's
safe-mode scan, which skips a file that does not say "airflow" and "dag").
"""

from __future__ import annotations

from cloudburst_dags import workload_dag

csv_classifier_dag = workload_dag("csv_classifier", doc_md=__doc__)
