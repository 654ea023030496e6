"""How a model was built — its builder and the builder's arguments — so a saved model is rebuilt from installed code,
never from its file.

A Keras file that holds an architecture can hold code: a ``Lambda`` layer's function (Keras 2.15's H5 loader runs
it whatever ``safe_mode`` says) or a ``TFOpLambda`` naming any TensorFlow op, file writes included. So a model is
saved as weights alone (training.models.model_files) with this record beside it, and loading calls the builder the
record names — only a function marked with :func:`recorded` (or :func:`recorded_part`), only in this package or a
registered workload's package (training.workload_packages: code the user installed, not a file they were sent). A
workload from outside the tree marks its model builder the same way. Standard library only.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from training.workload_packages import packages

ATTRIBUTE = "cloudburst_architecture"  # a JSON string on the model: Keras does not track strings
BUILDER_MARK = "__cloudburst_model_builder__"
PART_MARK = "__cloudburst_model_part__"
TRUSTED_PACKAGES = ("training.models",)  # besides every registered workload's package
# Builders and parts that moved: the reference a saved model recorded → where it lives now. A saved record is never
# rewritten (the manifest's digests cover it), so models saved before a move load through this table; a model built
# now records where its builder is. Only a marked builder in a trusted package is called, as for any record. The one
# place a moved builder is declared; tests/test_model_files.py rebuilds every entry.
MOVED_REFERENCES = {
    # issue 43: each workload holds its own model code
    "training.models.cnn:simard_cnn": "training.workloads.mnist_elastic_cnn.model:simard_cnn",
    "training.models.densenet_bilstm:densenet_bilstm": "training.workloads.kws_densenet_bilstm.model:densenet_bilstm",
    "training.models.speaker_embedding:densenet_bilstm_embedder":
        "training.workloads.speaker_verification.speaker_embedding:densenet_bilstm_embedder",
    "training.models.speaker_embedding:tdnn_embedder":
        "training.workloads.speaker_verification.speaker_embedding:tdnn_embedder",
    "training.models.speaker_embedding:embedding_model":
        "training.workloads.speaker_verification.speaker_embedding:embedding_model",
}


class ArchitectureError(ValueError):
    """A model has no recorded architecture, or a record names a builder, part or argument that may not be called."""


def _plain(value: Any, where: str) -> Any:
    """A builder argument as JSON (tuples become lists); anything else cannot be rebuilt and is refused."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item, where) for item in value]
    raise ArchitectureError(f"{where}: a {type(value).__name__} argument cannot be recorded (numbers, text and "
                            "lists only)")


def _from_plain(value: Any) -> Any:
    return tuple(_from_plain(item) for item in value) if isinstance(value, list) else value


def _record(model: Any, architecture: Mapping[str, Any]) -> Any:
    object.__setattr__(model, ATTRIBUTE, json.dumps(architecture, sort_keys=True))
    return model


def _reference(function: Callable[..., Any]) -> str:
    return f"{function.__module__}:{function.__qualname__}"


def recorded(builder: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a model builder: every model it returns carries its reference and arguments, and only marked builders
    are called to rebuild a saved model."""
    signature = inspect.signature(builder)
    reference = _reference(builder)

    @functools.wraps(builder)
    def build(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {key: _plain(value, f"{reference}({key}=…)") for key, value in bound.arguments.items()}
        return _record(builder(*args, **kwargs), {"builder": reference, "arguments": arguments})

    setattr(build, BUILDER_MARK, True)
    return build


def recorded_part(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Mark a function that takes a recorded model to a part of it (sharing its layers), e.g. its embedding."""
    reference = _reference(function)

    @functools.wraps(function)
    def take(model: Any) -> Any:
        whole = getattr(model, ATTRIBUTE, None)
        taken = function(model)
        if whole is not None:
            _record(taken, {**json.loads(whole), "part": reference})
        return taken

    setattr(take, PART_MARK, True)
    return take


def architecture_of(model: Any) -> dict[str, Any]:
    """The record a recorded builder left on ``model``; ArchitectureError for a model built any other way."""
    text = getattr(model, ATTRIBUTE, None)
    if text is None:
        raise ArchitectureError(f"model {getattr(model, 'name', model)!r} was not built by a builder marked with "
                                "training.models.architecture.recorded, so it cannot be saved to be rebuilt: mark "
                                "the workload's model builder with @recorded")
    return json.loads(text)


def trusted_packages() -> tuple[str, ...]:
    """Where a builder may live: this package and every registered workload's (their code is installed)."""
    return (*TRUSTED_PACKAGES, *packages())


def _marked_function(reference: Any, mark: str) -> Callable[..., Any]:
    """The function a record names (or, for a moved one, its new reference), when it lives in a trusted package and
    carries ``mark``."""
    reference = MOVED_REFERENCES.get(reference, reference) if isinstance(reference, str) else reference
    module_name, _, name = str(reference).partition(":")
    shown = str(reference)[:80]
    if not any(module_name == package or module_name.startswith(f"{package}.") for package in trusted_packages()):
        raise ArchitectureError(f"{shown!r} is not in training.models or a registered workload's package")
    try:
        function = getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        function = None
    if not getattr(function, mark, False):
        raise ArchitectureError(f"{shown!r} is not a function marked as a model "
                                f"{'builder' if mark == BUILDER_MARK else 'part'}")
    return function


def rebuild(architecture: Any) -> Any:
    """A fresh model (new weights) from a record: its marked builder called with its arguments, then its marked
    part, if any. ArchitectureError for anything else."""
    if not isinstance(architecture, Mapping) or not set(architecture) <= {"builder", "arguments", "part"}:
        raise ArchitectureError("an architecture record holds 'builder', 'arguments' and optionally 'part'")
    builder = _marked_function(architecture.get("builder"), BUILDER_MARK)
    part = architecture.get("part")
    take = _marked_function(part, PART_MARK) if part is not None else None
    arguments = architecture.get("arguments")
    if not isinstance(arguments, Mapping):
        raise ArchitectureError(f"{architecture['builder']}: its arguments are not a mapping")
    plain = {key: _plain(value, f"{architecture['builder']}({str(key)[:60]}=…)") for key, value in arguments.items()}
    try:
        inspect.signature(builder).bind(**plain)
        model = builder(**{key: _from_plain(value) for key, value in plain.items()})
    except (TypeError, ValueError) as error:
        raise ArchitectureError(f"{architecture['builder']}: cannot be built from the recorded arguments "
                                f"({str(error)[:200]})") from None
    return take(model) if take is not None else model
