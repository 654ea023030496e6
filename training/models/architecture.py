"""How a model was built — the builder's name and its arguments — so a saved model is rebuilt from this package's
own code, never from its file.

A Keras file that holds an architecture can hold code: a ``Lambda`` layer's function (Keras 2.15's H5 loader runs
it whatever ``safe_mode`` says) or a ``TFOpLambda`` naming any TensorFlow op, file writes included. So a model is
saved as weights alone (training.models.model_files) with this record beside it, and loading calls the builder the
record names from :data:`BUILDERS` — a fixed table, not an import path read from a file. Standard library only.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

# builder name → module defining it; a record naming anything else is refused.
BUILDERS: dict[str, str] = {
    "simard_cnn": "training.models.cnn",
    "densenet_bilstm": "training.models.densenet_bilstm",
    "densenet_bilstm_embedder": "training.models.speaker_embedding",
    "tdnn_embedder": "training.models.speaker_embedding",
}
# part name → "module:function" taking the whole model and returning the part (sharing its layers).
PARTS: dict[str, str] = {"embedding": "training.models.speaker_embedding:embedding_model"}
ATTRIBUTE = "cloudburst_architecture"  # a JSON string on the model: Keras does not track strings


class ArchitectureError(ValueError):
    """A model has no recorded architecture, or a record names a builder, part or argument that does not exist."""


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


def recorded(builder: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a model builder of :data:`BUILDERS`: every model it returns carries its name and arguments."""
    name = builder.__name__
    if name not in BUILDERS:
        raise ArchitectureError(f"builder {name!r} is not in training.models.architecture.BUILDERS")
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def build(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {key: _plain(value, f"{name}({key}=…)") for key, value in bound.arguments.items()}
        return _record(builder(*args, **kwargs), {"builder": name, "arguments": arguments})

    return build


def recorded_part(part: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorate a function taking a recorded model to one of its parts (:data:`PARTS`)."""
    if part not in PARTS:
        raise ArchitectureError(f"part {part!r} is not in training.models.architecture.PARTS")

    def decorate(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(function)
        def take(model: Any) -> Any:
            whole = getattr(model, ATTRIBUTE, None)
            taken = function(model)
            if whole is not None:
                _record(taken, {**json.loads(whole), "part": part})
            return taken

        return take

    return decorate


def architecture_of(model: Any) -> dict[str, Any]:
    """The record a recorded builder left on ``model``; ArchitectureError for a model built any other way."""
    text = getattr(model, ATTRIBUTE, None)
    if text is None:
        raise ArchitectureError(f"model {getattr(model, 'name', model)!r} was not built by a builder of "
                                "training.models.architecture.BUILDERS, so it cannot be saved to be rebuilt")
    return json.loads(text)


def _function(reference: str) -> Callable[..., Any]:
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def rebuild(architecture: Any) -> Any:
    """A fresh model (new weights) from a record: the builder of :data:`BUILDERS` it names, called with its
    arguments, then the part it names, if any. ArchitectureError for anything else."""
    if not isinstance(architecture, Mapping) or not set(architecture) <= {"builder", "arguments", "part"}:
        raise ArchitectureError("an architecture record holds 'builder', 'arguments' and optionally 'part'")
    name, arguments, part = architecture.get("builder"), architecture.get("arguments"), architecture.get("part")
    if name not in BUILDERS:
        raise ArchitectureError(f"builder {str(name)[:60]!r} is not one of {', '.join(BUILDERS)}")
    if part is not None and part not in PARTS:
        raise ArchitectureError(f"part {str(part)[:60]!r} is not one of {', '.join(PARTS)}")
    if not isinstance(arguments, Mapping):
        raise ArchitectureError(f"{name}: its arguments are not a mapping")
    builder = _function(f"{BUILDERS[name]}:{name}")
    plain = {key: _plain(value, f"{name}({str(key)[:60]}=…)") for key, value in arguments.items()}
    try:
        inspect.signature(builder).bind(**plain)
        model = builder(**{key: _from_plain(value) for key, value in plain.items()})
    except (TypeError, ValueError) as error:
        raise ArchitectureError(f"{name}: cannot be built from the recorded arguments ({str(error)[:200]})") from None
    return _function(PARTS[part])(model) if part is not None else model
