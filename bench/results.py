"""A measurement as a file the docs are rendered from: docs/results/<name>.json.

Each file says what was run, when, on which commit and on which machine; infra/docs/render.py fills the docs'
figures and tables from it (`<!-- table bench-<name> KEY -->`), so a figure in the docs is one that was measured.
The benches write theirs here when they finish; infra/docs/record.py writes the demos' and `make test`'s.
"""

from __future__ import annotations

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


def table(columns: list[tuple[str, str, str]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A table for the docs: columns as (title, the row's key, format: pct, pct1, x, s, min, int, num, text)."""
    return {"columns": [list(entry) for entry in columns], "rows": rows}


def publish(name: str, command: str, values: dict[str, Any], tables: dict[str, Any] | None = None,
            recorded: str | None = None) -> Path:
    """Write docs/results/<name>.json whole (a temporary file renamed into place) and say where."""
    document = {"name": name, "command": command,
                "recorded": recorded or datetime.now(UTC).date().isoformat(),
                "commit": commit(), "machine": machine(), "values": values, "tables": tables or {}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"{name}.json"
    staging = target.with_suffix(".json.tmp")
    staging.write_text(json.dumps(document, indent=1) + "\n")
    staging.replace(target)
    print(f"recorded {target.relative_to(REPO_ROOT)} (make docs renders it)")
    return target
