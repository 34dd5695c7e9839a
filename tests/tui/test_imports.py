"""Import rules (issue 12): the core never imports Textual, and the console never imports torch (it reads the store,
and the theory overlay comes from the torch-free ``models.ode``). Checked on the source (every import statement)
and at run time (a console driven through every panel, the theory overlay included, in a fresh process)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sparse_tui

PKG = Path(sparse_tui.__file__).parent


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_core_never_imports_textual():
    bad = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
           if "tui" not in p.relative_to(PKG).parts and _imports(p) & {"textual", "textual_plotext"}]
    assert bad == []


def test_console_source_never_imports_torch():
    bad = [str(p.relative_to(PKG)) for p in (PKG / "tui").rglob("*.py") if "torch" in _imports(p)]
    assert bad == []


def test_console_poller_only_reads_the_store():
    """The store poller reads and posts; the science (the ODE of the theory overlay) is the core's, computed in a
    worker at the Curves panel's request (issue 23: the console does not reach into the science)."""
    mods = set()
    for node in ast.walk(ast.parse((PKG / "tui" / "poller.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    heavy = ("sparse_tui.models", "sparse_tui.science.theory", "sparse_tui.presets")
    assert not {m for m in mods if m.startswith(heavy)}


def test_console_never_loads_torch(synthetic: Path, presets_dir: Path):
    code = f"""
import asyncio, logging, sys
sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from tui.conftest import Seen, make, _Collect

async def main():
    app = make({str(synthetic)!r}, {str(presets_dir)!r})
    errors = _Collect()
    logging.getLogger("sparse_tui.tui").addHandler(errors)
    seen = Seen()
    async with app.run_test(size=(100, 30), message_hook=seen) as pilot:
        for _ in range(200):
            if seen.tables:
                break
            await pilot.pause(0.05)
        for keys in (["2", "down", "down", "enter"], ["2", "up", "up", "t"], ["5", "enter"], ["6"], ["1"]):
            await pilot.press(*keys)
            await pilot.pause(0.5)
        await pilot.press("2", "down", "down", "enter")  # a linreg toy run: the theory (ODE) overlay
        panel = app.query_one("CurvesPanel")
        for _ in range(100):
            d = panel.data
            if d is not None and any(panel.theory_curves.get(r) for r in d.run_ids):
                break
            await pilot.pause(0.05)
        assert d is not None and any(panel.theory_curves.get(r) for r in d.run_ids), "no theory overlay"
        assert not errors.texts, errors.texts
    print("TORCH", "torch" in sys.modules)

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert "TORCH False" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
