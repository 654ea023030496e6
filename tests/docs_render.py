"""infra/docs/render.py as a module, for the tests that check pages and tables against it (it is a script, not a
package: loaded from its file)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

RENDER_SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "docs" / "render.py"

_spec = importlib.util.spec_from_file_location("docs_render", RENDER_SCRIPT)
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)
