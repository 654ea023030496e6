"""The workload registry: one package per workload under training/workloads/, each exporting ``DEFINITION``.

Config, the CLI, the Airflow plugins, the benches and the demo all read workloads from here. Workloads from outside
the tree come after the built-in ones: those of installed distributions that declare an entry point in the group
``cloudburst.workloads`` (``csv_classifier = "cloudburst_csv_classifier"``: the value names the module exposing
``DEFINITION``; examples/csv_classifier/), then the importable module names of $CLOUDBURST_WORKLOADS
(comma-separated; tests use it for a toy workload). Standard library only, except :func:`workload_for`, which
builds the trainable side.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import re
from typing import TYPE_CHECKING

from training.settings import RunSpecError
from training.workloads.base import Trainable, WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec

BUILT_IN = ("training.workloads.mnist_elastic_cnn", "training.workloads.kws_densenet_bilstm",
            "training.workloads.speaker_verification")
EXTRA_WORKLOADS_VARIABLE = "CLOUDBURST_WORKLOADS"
ENTRY_POINT_GROUP = "cloudburst.workloads"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

__all__ = ["ENTRY_POINT_GROUP", "Trainable", "WorkloadDefinition", "WorkloadRegistrationError", "definition",
           "load_function", "names", "packages", "registry", "workload_for"]


class WorkloadRegistrationError(ValueError):
    """A registered workload package cannot be used; the one-line message names where it was registered."""


def _registrations() -> dict[str, str]:
    """Every workload module → where it was registered (built in, an installed distribution's entry point,
    $CLOUDBURST_WORKLOADS), in registration order. A module registered twice (installed and also named in the
    variable) counts once, where it came first: the same code."""
    found = dict.fromkeys(BUILT_IN, "built in")
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        distribution = entry.dist.name if entry.dist is not None else "an unknown distribution"
        origin = f"distribution {distribution!r} (entry point {entry.name!r} in {ENTRY_POINT_GROUP})"
        if not _MODULE_NAME.fullmatch(entry.value.strip()):
            raise WorkloadRegistrationError(
                f"{origin}: {entry.value!r} is not a module name; the entry point's value names the module that "
                f"exposes DEFINITION, e.g. {entry.name} = \"my_workload\"")
        found.setdefault(entry.value.strip(), origin)
    for name in os.environ.get(EXTRA_WORKLOADS_VARIABLE, "").split(","):
        if name.strip():
            found.setdefault(name.strip(), f"${EXTRA_WORKLOADS_VARIABLE}")
    return found


def packages() -> tuple[str, ...]:
    """The registered workload packages: the built-in ones, then those of installed distributions' entry points
    (group ``cloudburst.workloads``), then those named in $CLOUDBURST_WORKLOADS."""
    return tuple(_registrations())


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
                                        "training.workloads.base.WorkloadDefinition; it has "
                                        f"{type(workload).__name__ if workload is not None else 'none'}")
    return workload


@functools.cache
def registry() -> dict[str, WorkloadDefinition]:
    """Every workload by name, from :func:`packages`."""
    found: dict[str, WorkloadDefinition] = {}
    origins: dict[str, str] = {}
    for module_name, origin in _registrations().items():
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


def load_function(reference: str):  # noqa: ANN201 - returns whatever the named function is
    """``"package.module:function"`` → the function (imports the module)."""
    module_name, _, function_name = reference.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


def workload_for(spec: RunSpec) -> Trainable:
    """The trainable side of the run's workload (model builder, optimizer, readers) at the run's compute precision:
    training environment only."""
    from training.models.precision import with_precision

    return with_precision(load_function(definition(spec.workload).trainable)(spec), spec.precision)
