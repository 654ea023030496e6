"""A measurement as a file the docs are rendered from: docs/results/<name>.json.

Each file says what was run, when, on which commit and on which machine; infra/docs/render.py fills the docs'
figures and tables from it (`<!-- table bench-<name> KEY -->`), so a figure in the docs is one that was measured.
The benches write theirs here when they finish; infra/docs/record.py writes the demos' and `make test`'s.

Each bench publishes `bench-<target>` (the suffix of the make target that runs it: `make bench-roofline` →
bench-roofline) with `command` the make command, `values` its headline figures (raw: fractions, seconds, ratios)
and `tables` the tables it prints, built by the bench's own `result_tables(...)`.

The rule for other arguments: a bench records only a run whose arguments are exactly those of one of its make
targets (its `RUNS`: result name → make command and arguments, compared once parsed, defaults included;
cost_model_fit.py, which no target runs, records its own defaults). A run
with any other argument (a smaller size for a quick check, another target) prints its tables as before, says that
it recorded nothing, and leaves docs/results as it was: a quick check never overwrites the figures of the default
run, and every file under docs/results comes from a make command that can be run again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "docs" / "results"


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPU model, cores, memory."""
    model = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        model = names[0].strip() if names else model
    memory_gib = None
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = re.search(r"^MemTotal:\s*(\d+) kB", meminfo.read_text(), re.MULTILINE)
        memory_gib = round(int(kib.group(1)) / 2**20) if kib else None
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": memory_gib, "system": platform.platform()}


def commit() -> str:
    """The checkout's commit, with "+changes" when its tracked files (results aside) differ from it."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "diff", "--quiet", "HEAD", "--", ".", ":!docs/results"],
                               timeout=30).returncode
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def key(name: str) -> str:
    """A values key from a row's name, usable in a docs marker: lower case, every run of other characters one
    underscore ("keras, 1 process, 2 thr" → keras_1_process_2_thr, "downpour n_push=4" → downpour_n_push_4)."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def recorded_as(parser: argparse.ArgumentParser, args: argparse.Namespace,
                runs: dict[str, tuple[str, list[str]]]) -> tuple[str, str] | None:
    """(result name, make command) of the run in ``runs`` (name → make command, the arguments it passes) whose
    parsed arguments ``args`` are; None for any other arguments, which are not recorded (the module's rule)."""
    for name, (command, arguments) in runs.items():
        if vars(parser.parse_args(arguments)) == vars(args):
            return name, command
    return None


def publish_run(run: tuple[str, str] | None, values: dict[str, Any], tables: dict[str, Any]) -> Path | None:
    """``publish`` a make target's run; for other arguments only say that nothing was recorded."""
    if run is None:
        print("not recorded in docs/results: not a make target's arguments (bench/results.py records only those)")
        return None
    return publish(run[0], run[1], values, tables)


def table(columns: list[tuple[str, str, str]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A table for the docs: columns as (title, the row's key, format: pct, pct1, x, s, min, int, num, text)."""
    return {"columns": [list(entry) for entry in columns], "rows": rows}


def _plain(value: Any) -> Any:
    """NumPy's scalars and arrays as JSON's numbers and lists (a bench's figures often are NumPy's)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def publish(name: str, command: str, values: dict[str, Any], tables: dict[str, Any] | None = None,
            recorded: str | None = None) -> Path:
    """Write docs/results/<name>.json whole (a temporary file renamed into place) and say where."""
    document = {"name": name, "command": command,
                "recorded": recorded or datetime.now(UTC).date().isoformat(),
                "commit": commit(), "machine": machine(), "values": values, "tables": tables or {}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"{name}.json"
    staging = target.with_suffix(".json.tmp")
    staging.write_text(json.dumps(document, indent=1, default=_plain) + "\n")
    staging.replace(target)
    print(f"recorded {target.relative_to(REPO_ROOT)} (make docs renders it)")
    return target
