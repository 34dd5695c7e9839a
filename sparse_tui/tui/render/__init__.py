"""Pure helpers of the console, one module per panel or concern; nothing here imports Textual (the functions return
plain values or Rich ``Text`` and run in worker threads too).

* ``runs``: run-table rows, tags, filtering and sorting, the swept keys of a set of runs;
* ``groups``, ``compare``: runs grouped over seeds, and two runs or groups side by side;
* ``heatmap``: the colour ramp, scale bar and heatmap grid;
* ``attention``: the attention map of a snapshot;
* ``geometry``: a run's final token embedding as a labelled scatter (under the attention map);
* ``fit``: the Fit panel's request, options, fit and report rendering.
"""
