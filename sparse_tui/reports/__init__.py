"""The reports wing: what reads the store and the atlas to report on runs (docs/ARCHITECTURE.md: the module table,
"A new figure"). ``fitreport`` selects and fits runs (``sparse-tui fit``, the console's Fit panel), ``figures`` draws
publication figures (matplotlib, loaded lazily), ``reproduce`` trains and reports an atlas entry."""
