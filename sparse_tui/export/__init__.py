"""Runs out of the store: tables (CSV, JSON lines, Parquet) and bridges to TensorBoard and MLflow."""
