"""Strict JSON for the texts users hand us (DEMO_CONF, STUDY_CONF, a bench's --spec): bounded in size and nesting
before ``json.loads`` can recurse, no key given twice (json.loads would keep the last silently), no NaN or
Infinity. Every refusal is one line that names the text. Standard library only: the Airflow environment uses it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from training.settings import shown

MAX_CHARACTERS = 1_000_000  # far above any configuration, far below what could exhaust memory
MAX_DEPTH = 32  # a study's configuration nests 3 deep; Python's json recursion ends near 1,000
_SPECIAL = re.compile(r'[\[\]{}"\\]')  # what nesting depends on: brackets, quotes, backslashes


class JsonError(ValueError):
    """A JSON text from a user is refused; the message names it and says why."""


def loads_object(text: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object; ``what`` names it in the error (e.g. "DEMO_CONF")."""
    value = loads(text, what)
    if not isinstance(value, dict):
        raise JsonError(f"{what} must be a JSON object, e.g. '{{\"epochs\": 3}}', not {shown(value)}")
    return value


def loads(text: str, what: str) -> Any:
    """``text`` as JSON, refused in one line when too large, too deep, with a key twice or not JSON at all."""
    if len(text) > MAX_CHARACTERS:
        raise JsonError(f"{what} is {len(text):,} characters long; at most {MAX_CHARACTERS:,}")
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise JsonError(f"{what} nests {depth:,} levels deep; at most {MAX_DEPTH}")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise JsonError(f"{what} is not JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except ValueError as error:  # a key twice, NaN, an integer of thousands of digits
        raise JsonError(f"{what}: {error}") from None
    except RecursionError:  # not reached below MAX_DEPTH; kept so that no traceback can
        raise JsonError(f"{what} nests too deep") from None


def nesting_depth(text: str) -> int:
    """The deepest nesting of brackets outside strings: one pass over the special characters, no recursion."""
    depth = deepest = 0
    in_string, escaped = False, -1
    for match in _SPECIAL.finditer(text):
        position, character = match.start(), match.group()
        if position == escaped:
            continue
        if in_string:
            if character == "\\":
                escaped = position + 1
            in_string = character != '"'
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif character in "]}":
            depth -= 1
    return deepest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ValueError(f"the key {shown(key)} is given twice")
        value[key] = item
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")
