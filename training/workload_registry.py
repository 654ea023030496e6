"""The workload registry: one package per workload under training/workloads/, each exporting ``DEFINITION``.

Config, the CLI, the Airflow plugins, the benches and the demo all read workloads from here. Which packages are
workloads — the built-in ones, installed distributions' entry points, $CLOUDBURST_WORKLOADS — is
training.workload_packages'. Standard library only, except :func:`workload_for`, which builds the trainable side.
"""

from __future__ import annotations

import functools
import importlib

from training.settings import RunSettings, RunSpecError
from training.workload_definition import Trainable, WorkloadDefinition
from training.workload_packages import (
    ENTRY_POINT_GROUP,
    WorkloadRegistrationError,
    load_function,
    packages,
    registrations,
)

__all__ = ["ENTRY_POINT_GROUP", "Trainable", "WorkloadDefinition", "WorkloadRegistrationError", "definition",
           "names", "packages", "registry", "workload_for"]


def _load_definition(module_name: str, origin: str) -> WorkloadDefinition:
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # whatever a user's package raises, reported as one line (the cause chained)
        first_line = (str(error).splitlines() or [""])[0]
        raise WorkloadRegistrationError(f"{origin}: cannot import workload module {module_name!r} "
                                        f"({type(error).__name__}: {first_line})") from error
    workload = getattr(module, "DEFINITION", None)
    if not isinstance(workload, WorkloadDefinition):
        raise WorkloadRegistrationError(f"{origin}: module {module_name!r} must expose DEFINITION, a "
                                        "training.workload_definition.WorkloadDefinition; it has "
                                        f"{type(workload).__name__ if workload is not None else 'none'}")
    return workload


@functools.cache
def registry() -> dict[str, WorkloadDefinition]:
    """Every workload by name, from :func:`packages`."""
    found: dict[str, WorkloadDefinition] = {}
    origins: dict[str, str] = {}
    for module_name, origin in registrations().items():
        workload = _load_definition(module_name, origin)
        if workload.name in found:
            raise WorkloadRegistrationError(f"{origin}: module {module_name!r} defines workload {workload.name!r}, "
                                            f"registered already by {origins[workload.name]}; rename one")
        found[workload.name], origins[workload.name] = workload, f"module {module_name!r}, {origin}"
    return found


def names() -> tuple[str, ...]:
    return tuple(registry())


def definition(name: str) -> WorkloadDefinition:
    try:
        return registry()[name]
    except KeyError:
        raise RunSpecError(f"workload={name!r}: must be one of {', '.join(names())}") from None




def workload_for(spec: RunSettings) -> Trainable:
    """The trainable side of the run's workload (model builder, optimizer, readers) at the run's compute precision:
    training environment only."""
    from training.models.precision import with_precision

    return with_precision(load_function(definition(spec.workload).trainable)(spec), spec.precision)
