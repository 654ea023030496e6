"""Fill README.md and docs/ with figures from the recorded results (docs/results/*.json), and check that no measured
figure was typed by hand.

Markers (their inside is rewritten; write them empty):

    <!-- result FILE KEY FORMAT --><!-- /result -->   one value: docs/results/FILE.json, "values" → KEY (dotted;
                                                      @KEY: the file's own fields, @machine.cores say)
    <!-- table FILE KEY --><!-- /table -->            a table: "tables" → KEY, with where and when it was measured
    <!-- results-index --><!-- /results-index -->     every results file: command, date, commit, machine
    <!-- history --><!-- /history -->                 docs/results/history.json: the dated measurements of the past

FORMAT: pct (0.9935 → 99.35 %), pct1, x (1.12×), s, min, int (1,241), num (3 significant digits), text, block (a
fenced text block: a summary as a command printed it).
docs/settings.md is written whole from `cloudburst settings --markdown`.

    render.py          rewrite the marked places and docs/settings.md
    render.py --check  change nothing; fail when a page is stale, a marker names no recorded value, or a figure
                       that looks measured (a percentage, a speed-up, a duration) stands outside a marker

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
RESULTS = DOCS / "results"
SETTINGS_PAGE = DOCS / "settings.md"
TRAINING_PYTHON = REPO_ROOT / ".venv" / "training" / "bin" / "python"

RESULT = re.compile(r"<!-- result (\S+) (\S+) (\S+) -->(.*?)<!-- /result -->", re.DOTALL)
TABLE = re.compile(r"<!-- table (\S+) (\S+) -->(.*?)<!-- /table -->", re.DOTALL)
BLOCK = re.compile(r"<!-- (results-index|history) -->(.*?)<!-- /\1 -->", re.DOTALL)
# What a measurement looks like in prose: a percentage, a speed-up, a duration, a rate. Bounds and targets
# (≥ 97 %, ≤ 60 lines) are not measurements; neither is anything in code, a marker or a comment.
MEASURED = re.compile(r"(?<![≥≤<>~±] )(?<![≥≤<>~±\w.,/-])\d[\d,]*(?:\.\d+)?\s?"
                      r"(?:%|(?:×|x\b)(?!\s?\d)|s\b|ms\b|min\b|h\b|GFLOP/s|samples/s)")
# A bound, a default or a target said in words ("at least 3 %", "after 60 s", "a target of 99 %") is not a measurement.
BOUND_WORDS = re.compile(r"\b(at least|at most|up to|default|defaults to|after|within|more than|less than|"
                         r"target of|times out after|every)\s*$", re.IGNORECASE)
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|<!--.*?-->|\]\([^)]*\)|<img [^>]*>", re.DOTALL)
FORMATS = {
    "pct": lambda v: f"{100 * v:.2f} %",
    "pct1": lambda v: f"{100 * v:.1f} %",
    "x": lambda v: f"{v:.2f}×",
    "s": lambda v: f"{v:.1f} s",
    "min": lambda v: f"{v:.1f} min",
    "int": lambda v: f"{round(v):,}",
    "num": lambda v: f"{v:.3g}",
    "text": str,
    "block": lambda v: f"\n\n```text\n{v}\n```\n\n",
}


class RenderError(Exception):
    """A marker that cannot be filled: the message names the page and the marker."""


def load_results() -> dict[str, dict[str, Any]]:
    results = {}
    for path in sorted(RESULTS.glob("*.json")):
        if path.name == "history.json":
            continue
        document = json.loads(path.read_text())
        missing = [key for key in ("command", "recorded", "commit", "machine", "values") if key not in document]
        if missing:
            raise RenderError(f"{path.relative_to(REPO_ROOT)} lacks {', '.join(missing)}")
        results[path.stem] = document
    return results


def lookup(results: dict[str, dict[str, Any]], name: str, section: str, key: str) -> Any:
    if name not in results:
        raise RenderError(f"no recorded result docs/results/{name}.json")
    value: Any = results[name] if key.startswith("@") else results[name].get(section, {})
    for part in key.removeprefix("@").split("."):
        if not isinstance(value, dict) or part not in value:
            raise RenderError(f"docs/results/{name}.json has no {section} {key!r}")
        value = value[part]
    return value


def formatted(value: Any, form: str) -> str:
    if form not in FORMATS:
        raise RenderError(f"unknown format {form!r} (one of {', '.join(FORMATS)})")
    return FORMATS[form](value)


def provenance(document: dict[str, Any], name: str) -> str:
    machine = document["machine"]
    return (f"Recorded {document['recorded']} by `{document['command']}` on {machine.get('cores')} cores "
            f"({machine.get('cpu')}), checkout {document['commit']}: `docs/results/{name}.json`.")


def table(results: dict[str, dict[str, Any]], name: str, key: str) -> str:
    spec = lookup(results, name, "tables", key)
    columns = spec["columns"]  # [[title, row key, format], …]
    lines = ["| " + " | ".join(title for title, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in spec["rows"]:
        cells = [formatted(row[field], form) if row.get(field) is not None else "—" for _, field, form in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(["", *lines, "", provenance(results[name], name), ""])


def results_index(results: dict[str, dict[str, Any]]) -> str:
    lines = ["", "| File | Command | Recorded | Checkout | Machine |", "|---|---|---|---|---|"]
    for name, document in results.items():
        machine = document["machine"]
        lines.append(f"| `docs/results/{name}.json` | `{document['command']}` | {document['recorded']} | "
                     f"{document['commit']} | {machine.get('cores')} cores, {machine.get('memory_gib')} GiB |")
    return "\n".join([*lines, ""])


def history() -> str:
    path = RESULTS / "history.json"
    if not path.exists():
        return "\n"
    entries = json.loads(path.read_text())
    parts = [""]
    for number, entry in enumerate(entries, start=1):
        missing = [key for key in ("date", "topic", "text") if key not in entry]
        if not missing and "section" not in entry and not {"record", "commit"} <= entry.keys():
            missing = ["section (or record and commit)"]
        if missing:
            raise RenderError(f"{path.relative_to(REPO_ROOT)}: entry {number} lacks {', '.join(missing)}")
        # An entry is a note from the README's old lab notebook (its section) or a recorded result that a later
        # run of its command replaced (its file and checkout), so that superseded figures stay readable.
        origin = (f"*From the README's section “{entry['section']}”.*" if "section" in entry
                  else f"*Superseded record: `{entry['record']}` of checkout {entry['commit']}.*")
        parts += [f"### {entry['date']} — {entry['topic']}", "", origin, "", entry["text"].strip(), ""]
    return "\n".join(parts)


def render_page(text: str, results: dict[str, dict[str, Any]], page: str) -> str:
    def one_value(match: re.Match[str]) -> str:
        name, key, form = match.group(1), match.group(2), match.group(3)
        try:
            shown = formatted(lookup(results, name, "values", key), form)
        except RenderError as error:
            raise RenderError(f"{page}: {error}") from None
        return f"<!-- result {name} {key} {form} -->{shown}<!-- /result -->"

    def one_table(match: re.Match[str]) -> str:
        name, key = match.group(1), match.group(2)
        try:
            return f"<!-- table {name} {key} -->{table(results, name, key)}<!-- /table -->"
        except RenderError as error:
            raise RenderError(f"{page}: {error}") from None

    def one_block(match: re.Match[str]) -> str:
        kind = match.group(1)
        body = results_index(results) if kind == "results-index" else history()
        return f"<!-- {kind} -->{body}<!-- /{kind} -->"

    return BLOCK.sub(one_block, TABLE.sub(one_table, RESULT.sub(one_value, text)))


def settings_page() -> str:
    python = str(TRAINING_PYTHON) if TRAINING_PYTHON.exists() else sys.executable
    markdown = subprocess.run([python, "-m", "training.command", "settings", "--markdown"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120, check=True).stdout
    return ("<!-- Generated by infra/docs/render.py from `cloudburst settings --markdown`: edit training/settings.py "
            "and the workloads' settings, not this page. -->\n\n" + markdown)


def typed_figures(text: str, page: str) -> list[str]:
    """Figures that look measured and stand outside every marker: `page:line: figure`."""
    blanked = text
    for pattern in (RESULT, TABLE, BLOCK, NOT_PROSE):
        blanked = pattern.sub(lambda match: re.sub(r"[^\n]", " ", match.group(0)), blanked)
    found = []
    for number, line in enumerate(blanked.splitlines(), 1):
        found += [f"{page}:{number}: {match.group(0)!r}" for match in MEASURED.finditer(line)
                  if not BOUND_WORDS.search(line[:match.start()])]
    return found


def pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted(path for path in DOCS.rglob("*.md") if path != SETTINGS_PAGE)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; fail on a stale page or a typed figure")
    args = parser.parse_args(argv)
    try:
        results = load_results()
        wanted = {path: render_page(path.read_text(), results, str(path.relative_to(REPO_ROOT))) for path in pages()}
        wanted[SETTINGS_PAGE] = settings_page()
    except (RenderError, subprocess.SubprocessError, json.JSONDecodeError) as error:
        print(f"render: {error}", file=sys.stderr)
        return 1
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    typed = [line for path, text in wanted.items() if path != SETTINGS_PAGE
             for line in typed_figures(text, str(path.relative_to(REPO_ROOT)))]
    if args.check:
        for path in stale:
            print(f"render: {path.relative_to(REPO_ROOT)} is stale: run `make docs`", file=sys.stderr)
        for line in typed:
            print(f"render: a figure typed by hand, not from docs/results: {line}", file=sys.stderr)
        return 1 if stale or typed else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"rendered {path.relative_to(REPO_ROOT)}")
    for line in typed:
        print(f"render: a figure typed by hand, not from docs/results: {line}", file=sys.stderr)
    return 1 if typed else 0


if __name__ == "__main__":
    sys.exit(main())
