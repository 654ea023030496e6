"""The room keyword spotting and speaker verification share on purpose: the Speech Commands corpus format and its
ingestion, the synthetic corpus, audio features and augmentation, speaker sets and trials, and the features step.

A workload's own code stays in its package (training/workloads/<name>/); what both use lives here, so neither imports
the other for it. This package's ``__init__``, :mod:`.constants` and :mod:`.corpus_settings` are standard library
only (with training.settings): the workloads' definitions import them in the Airflow environment too.
"""
