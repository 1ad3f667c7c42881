"""nsyswrap's benchmark: a generated 8-rank run measured beside a SQLite floor and a pandas
baseline.

Run it from the repository root with ``python -m bench`` (see bench/README.md).
"""
