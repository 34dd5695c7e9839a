"""The console on a copied store, driven headless by Textual's Pilot (no pytest needed): used by .ci/installed in
a venv without torch. It waits for the run table, opens Runs (2), Curves (3) on the marked runs, Attention (4) and
Fit (5), and fails (exit 1) unless every run of the store is listed, curves arrived and torch was never imported.

    python .ci/console_check.py RUNS_DIR
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time


async def check(runs_dir: str) -> list[str]:
    from sparse_tui.store import RunStore
    from sparse_tui.tui.app import SparseTuiApp
    from sparse_tui.tui.messages import CurvesData

    want = {r.run_id for r in RunStore(runs_dir).runs()}
    seen: list = []
    app = SparseTuiApp(runs_dir, tempfile.mkdtemp(), gpu=False, poll_interval=0.1)

    async def until(cond, timeout: float = 60.0) -> bool:
        t0 = time.monotonic()
        while not cond():
            if time.monotonic() - t0 > timeout:
                return False
            await pilot.pause(0.1)
        return True

    problems = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        if not await until(lambda: {r.run_id for r in app.main.records} == want and app.main.panels_mounted()):
            problems.append(f"the run table never listed the store's {len(want)} runs")
        await pilot.press("2")
        await pilot.pause(0.3)
        await pilot.press("a")  # mark every shown run
        await pilot.press("3")
        if not await until(lambda: any(isinstance(m, CurvesData) and m.series for m in seen)):
            problems.append("Curves drew no series")
        for key in ("4", "5", "2"):
            await pilot.press(key)
            await pilot.pause(0.3)
    if "torch" in sys.modules:
        problems.append("the console imported torch")
    return problems


def main() -> None:
    problems = asyncio.run(check(sys.argv[1]))
    for p in problems:
        print(f"console check: {p}", file=sys.stderr)
    print("console check: " + ("FAILED" if problems else "the console listed the runs and drew their curves"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
