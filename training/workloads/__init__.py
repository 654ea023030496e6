"""The workload registry: one package per workload under training/workloads/, each exporting ``DEFINITION``.

Config, the CLI, the Airflow plugins, the benches and the demo all read workloads from here. More workload
packages (importable module names, comma-separated) can be added with $CLOUDBURST_WORKLOADS — tests use it for a
toy workload. Standard library only, except :func:`workload_for`, which builds the trainable side.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import TYPE_CHECKING

from training.settings import RunSpecError
from training.workloads.base import Trainable, WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec

BUILT_IN = ("training.workloads.mnist_elastic_cnn", "training.workloads.kws_densenet_bilstm",
            "training.workloads.speaker_verification")
EXTRA_WORKLOADS_VARIABLE = "CLOUDBURST_WORKLOADS"

__all__ = ["Trainable", "WorkloadDefinition", "definition", "load_function", "names", "packages", "registry",
           "workload_for"]


def packages() -> tuple[str, ...]:
    """The registered workload packages: the built-in ones, then those named in $CLOUDBURST_WORKLOADS."""
    extra = [name.strip() for name in os.environ.get(EXTRA_WORKLOADS_VARIABLE, "").split(",") if name.strip()]
    return (*BUILT_IN, *extra)


@functools.cache
def registry() -> dict[str, WorkloadDefinition]:
    """Every workload by name, from :func:`packages`."""
    found: dict[str, WorkloadDefinition] = {}
    for module_name in packages():
        workload = importlib.import_module(module_name).DEFINITION
        if workload.name in found:
            raise ValueError(f"{module_name}: a workload named {workload.name!r} is registered already")
        found[workload.name] = workload
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
