"""``sparse-tui reproduce``: the atlas (``sparse_tui.atlas``) put to work; the console's atlas uses the same.

* ``status_rows`` / ``list_lines`` / ``list_json``: one row per atlas entry for ``reproduce --list``: its verdict
  (computed from the store's runs where it holds all of them, else the record's), cost, stored runs, figure.
* ``match_runs``: the store's runs whose configuration equals a preset's run (every key but the preset's name,
  description and tags) and whose status is a result (finished, or diverged: training is seeded, it would diverge
  again), so that a figure reuses what any earlier ``run``, ``reproduce`` or console launch trained.
* ``plan``: an entry at one size against the store: its runs, those reused, those to train. The CLI trains the rest
  through the runner (``runner.coordinate``, as ``run --headless``); the console through ``runner.start_detached``.
* ``report``: the paper beside the measurement, by the function the entry names (``Entry.report``) or its kind's:
  ``law_report`` (fit of ``entry.fit_vars`` with the entry's law, exponents against their targets, plateau per grid
  point against the law), ``curves_report`` (plateaus and the transition's sharpness), ``p_table_report`` (Fig. 3
  right) and the entries' own (one per figure of the reduced dynamics, the tables and curves of the recall and blog
  entries). ``draw`` writes the figure the entry names (``Entry.plot``, in ``figures``).

No torch, no textual at import.
"""

from __future__ import annotations





# ---------------------------------------------------------------------------------------------------------------
# What a figure needs: its preset's runs, those already in the store, those to train
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# Reports: the paper beside the measurement
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# The reduced dynamics (Figs. 1a, 1b, 6, 7, 8, 10): numbers read off the 'ode' runs, beside what the paper states
# ---------------------------------------------------------------------------------------------------------------


