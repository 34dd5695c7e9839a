"""The reports wing: what reads the store and the atlas to report on runs (docs/ARCHITECTURE.md: the module table,
"A new figure"). ``fitreport`` selects and fits runs (``sparse-tui fit``, the console's Fit panel); ``reproduce``
plans, trains and reports atlas entries (``planner``, ``library``; ``listing`` is ``reproduce --list``); ``entries/``
holds one module per figure (report, figure, claim) on ``base`` (``Report``, ``Claim``, ``figure_writer``);
``figures`` draws the generic kinds (matplotlib, loaded lazily); ``verdict`` is the one verdict rule."""
