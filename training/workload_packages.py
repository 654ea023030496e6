"""Which packages are workloads: the built-in ones, then those of installed distributions that declare an entry
point in the group ``cloudburst.workloads`` (``csv_classifier = "cloudburst_csv_classifier"``: the value names the
module exposing ``DEFINITION``; examples/csv_classifier/), then the importable module names of $CLOUDBURST_WORKLOADS
(comma-separated; tests use it for a toy workload).

Standard library only, and none of those packages is imported here: the registry (training.workloads) loads their
definitions, and the model loader (training.models.architecture) calls model builders only in them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re

BUILT_IN = ("training.workloads.mnist_elastic_cnn", "training.workloads.kws_densenet_bilstm",
            "training.workloads.speaker_verification")
EXTRA_WORKLOADS_VARIABLE = "CLOUDBURST_WORKLOADS"
ENTRY_POINT_GROUP = "cloudburst.workloads"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class WorkloadRegistrationError(ValueError):
    """A registered workload package cannot be used; the one-line message names where it was registered."""


def registrations() -> dict[str, str]:
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
    return tuple(registrations())

def load_function(reference: str):  # noqa: ANN201 - returns whatever the named function is
    """``"package.module:function"`` → the function (imports the module): how a definition's steps, readers and
    builders are named (training.workload_definition.WorkloadDefinition)."""
    module_name, _, function_name = reference.partition(":")
    return getattr(importlib.import_module(module_name), function_name)
