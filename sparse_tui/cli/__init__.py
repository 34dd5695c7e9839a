"""The ``sparse-tui`` command line (Typer). Thin: every command imports its heavy modules (torch, textual) inside
its body, so ``sparse-tui --help`` stays light. Exit codes: see ``exitcodes.ExitCode``.

The package: ``common`` (the app and what commands share), then one module per group of commands; importing
them registers their commands in the order ``--help`` lists them.
"""

from __future__ import annotations

from importlib import import_module

from sparse_tui.cli.common import app

GROUPS = ("train", "runs", "science", "doctor")  # importing a group registers its commands, in --help's order
for _group in GROUPS:
    import_module(f"sparse_tui.cli.{_group}")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
