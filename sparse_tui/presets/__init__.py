"""Experiment presets: the pydantic schema, TOML loading, ``--set`` overrides and sweep expansion.

A preset is a TOML file with the sections ``[task]``, ``[model]``, ``[train]``, ``[eval]``, ``[plateau]``,
an optional ``[sweep]`` table mapping dotted keys to lists of values, and a top-level ``seeds`` list.
The runs of a preset are the cartesian product of the sweep lists times the seeds (``expand``).

Every field carries a description: the TUI builds its preset form from this schema, and
``sparse-tui presets --schema`` prints it. Errors are collected as ``PresetError`` with one line per problem
in the form ``FILE: key.path: message`` (no traceback; the CLI exits 2).

The package: ``schema`` (the sections), ``fields`` (their base and limits), ``tasks`` (the task kinds and their
registry), ``errors`` (``PresetError`` and its lines), ``loading`` (files, overrides, sweep expansion). It imports
neither torch nor textual, so ``sparse-tui --help`` stays light.
"""
