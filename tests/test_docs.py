"""The docs: every figure comes from a recorded result, every page is rendered from today's results and settings,
and the site builds in MkDocs' strict mode, where a broken link or anchor fails it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_render import render

REPO_ROOT = Path(__file__).resolve().parents[1]
MKDOCS = REPO_ROOT / ".venv" / "docs" / "bin" / "mkdocs"
os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material 9.8 prints a notice on every build
README_MOST_LINES = 200



@pytest.fixture
def mkdocs() -> Path:
    if not MKDOCS.exists():
        if os.environ.get("CLOUDBURST_REQUIRE_DOCS"):
            pytest.fail(f"no {MKDOCS}: infra/setup.sh docs builds it")
        pytest.skip("the docs environment is not built (infra/setup.sh docs)")
    return MKDOCS


def test_every_page_is_rendered_from_the_recorded_results_and_no_figure_is_typed():
    completed = subprocess.run([sys.executable, "infra/docs/render.py", "--check"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr


def test_a_typed_figure_is_found_and_a_bound_a_configuration_or_code_is_not():
    text = "\n".join(["Training took 38.6 s, a 1.12× speed-up, 99.35 % accurate.",
                      "Targets: ≥ 97 % on held-out speakers; 1 × 2 and 1x2 are configurations; `--budget 45 min`.",
                      "<!-- result demo x pct -->99.28 %<!-- /result --> comes from a file.",
                      "```", "took 5 min", "```"])
    found = render.typed_figures(text, "page.md")
    assert [line.split(": ", 1)[1] for line in found] == ["'38.6 s'", "'1.12×'", "'99.35 %'"]


def test_a_marker_renders_its_recorded_value_and_one_naming_no_value_is_refused():
    results = {"demo": {"command": "make demo", "recorded": "2026-12-06", "commit": "abc", "machine": {"cores": 2},
                        "values": {"1x1": {"test_accuracy": 0.9928, "speedup": 1.1235}}, "tables": {}}}
    page = ("<!-- result demo 1x1.test_accuracy pct --><!-- /result --> at "
            "<!-- result demo 1x1.speedup x -->stale<!-- /result -->")
    assert render.render_page(page, results, "p.md") == ("<!-- result demo 1x1.test_accuracy pct -->99.28 %"
                                                        "<!-- /result --> at <!-- result demo 1x1.speedup x -->"
                                                        "1.12×<!-- /result -->")
    with pytest.raises(render.RenderError, match="p.md: docs/results/demo.json has no values '1x2.speedup'"):
        render.render_page("<!-- result demo 1x2.speedup x --><!-- /result -->", results, "p.md")
    with pytest.raises(render.RenderError, match="no recorded result docs/results/bench.json"):
        render.render_page("<!-- table bench rows --><!-- /table -->", results, "p.md")


def test_every_results_file_says_when_where_and_by_which_command():
    for path in sorted((REPO_ROOT / "docs" / "results").glob("*.json")):
        if path.name == "history.json":
            continue
        document = json.loads(path.read_text())
        assert {"command", "recorded", "commit", "machine", "values"} <= set(document), path.name
        assert document["machine"].get("cores"), path.name


def test_a_history_entry_says_where_it_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A README note names its section; a superseded record names its file and checkout. An entry with neither
    # is refused by name, not rendered as a KeyError.
    monkeypatch.setattr(render, "RESULTS", tmp_path)
    monkeypatch.setattr(render, "REPO_ROOT", tmp_path.parent)
    note = {"date": "2026-11-30", "topic": "a note", "section": "Benchmarks", "text": "12 s."}
    record = {"date": "2026-12-07", "topic": "a record", "record": "docs/results/bench.json", "commit": "abc123",
              "text": "3.6 %."}
    (tmp_path / "history.json").write_text(json.dumps([note, record]))
    text = render.history()
    assert "*From the README's section “Benchmarks”.*" in text
    assert "*Superseded record: `docs/results/bench.json` of checkout abc123.*" in text
    without_commit = {key: value for key, value in record.items() if key != "commit"}
    (tmp_path / "history.json").write_text(json.dumps([note, without_commit]))
    with pytest.raises(render.RenderError, match="history.json: entry 2 lacks section \\(or record and commit\\)"):
        render.history()


def test_the_readme_is_short():
    lines = (REPO_ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines"


def test_the_site_builds_in_strict_mode(mkdocs: Path, tmp_path: Path):
    completed = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert (tmp_path / "site" / "settings" / "index.html").exists()


def test_a_broken_link_or_anchor_fails_the_strict_build(mkdocs: Path, tmp_path: Path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO_ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(REPO_ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("results"))
    faq = copy / "docs" / "faq.md"
    for broken in ("[gone](no-such-page.md)", "[gone](concepts.md#no-such-anchor)"):
        faq.write_text(faq.read_text() + f"\n\n{broken}\n")
        completed = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                                   cwd=copy, capture_output=True, text=True, timeout=300)
        assert completed.returncode != 0, broken
        faq.write_text(faq.read_text().replace(f"\n\n{broken}\n", ""))
