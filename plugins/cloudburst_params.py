"""Typed DAG Params for Cloudburst runs, generated from the settings table (training.settings and each workload's
own): one Param per setting the workload uses, with its title, description, bounds and form section, and the
workload's defaults — so the trigger form explains itself and checks what the run specification checks."""

from __future__ import annotations

import dataclasses

from airflow.sdk import Param

from training import workload_registry as workloads
from training.config import workload_defaults, workload_settings


def run_params(workload: str) -> dict[str, Param]:
    """Params for every setting of ``workload`` that belongs on its form (``workload`` itself is the DAG's)."""
    definition = workloads.definition(workload)
    defaults = workload_defaults(workload)
    params: dict[str, Param] = {}
    for entry in workload_settings(workload):
        if not entry.on_form:
            continue
        schema = entry.json_schema(defaults[entry.name])
        if entry.name == "data_source" and definition.source_help:
            schema["description"] = f"{definition.source_help} {entry.description}"
        default = defaults[entry.name]
        if entry.name == "run_name":  # empty: derived from the DAG run id, so a retried task resumes the same run
            default = ""
            schema = dataclasses.replace(entry, optional=True).json_schema(default)  # the same rule, or empty
        params[entry.name] = Param(default, **schema)
    return params
