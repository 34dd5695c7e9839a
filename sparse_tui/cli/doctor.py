"""``sparse-tui doctor``: the device and every training schedule on a tiny sweep (the checks: cli/checks.py,
imported when the command runs, so ``--help`` stays light)."""

from __future__ import annotations

import typer

from sparse_tui.cli.common import app, out


@app.command(short_help="Check the device and every training schedule on a tiny sweep.")
def doctor(
    device: str = typer.Option("auto", "--device", help="Device to check: auto, cpu, cuda, cuda:N."),
) -> None:
    """Check this machine before a real sweep: device, versions, free memory, then a tiny sweep trained with every
    schedule (sequential, stacked, CUDA-graphed) and compared with the sequential result. Exit 1 on any problem.
    Run it first on a new GPU server."""
    from sparse_tui.base.extras import missing_torch
    from sparse_tui.cli.common import fail

    if missing_torch():
        raise fail(missing_torch())
    from sparse_tui.cli.checks import diagnose

    code = diagnose(device, say=lambda line: out.print(line, markup=False, highlight=False))
    raise typer.Exit(code)
