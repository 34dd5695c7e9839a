"""The base: numbers and their formatting, devices, exit codes, safe file writes, start-up phases, system metrics and
terminal plots. Imports nothing else of sparse_tui."""
