"""Storage: reading nsys SQLite exports (validated, read-only, into Arrow), finding the
reports of a run and their ranks, and the one bounded store of everything computed."""
