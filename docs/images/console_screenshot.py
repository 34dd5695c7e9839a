"""Draw docs/images/console.svg (and .png) from the real console, as the README's quick start leaves it: the Fit
panel on the 20 runs of `sparse-tui reproduce fig1c --size cpu`.

    cd $(mktemp -d) && sparse-tui reproduce fig1c --size cpu    # the runs (about 20 s)
    python /path/to/docs/images/console_screenshot.py runs OUT_DIR

The PNG needs cairosvg (pip install cairosvg; not a dependency of sparse-tui)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sparse_tui.tui.app import SparseTuiApp


async def main(runs: Path, out: Path) -> None:
    app = SparseTuiApp(runs, "presets")
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(600):
            if app.query("RunsPanel") and app.query_one("RunsPanel").rows:
                break
            await pilot.pause(0.05)
        await pilot.press("2", "slash", *"fig1c", "enter", "5", "enter")
        fit = app.query_one("FitPanel")
        for _ in range(600):
            if fit.result is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        app.save_screenshot(filename="console.svg", path=str(out))
    try:
        import cairosvg
    except ImportError:
        return
    cairosvg.svg2png(url=str(out / "console.svg"), write_to=str(out / "console.png"), output_width=1600)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
