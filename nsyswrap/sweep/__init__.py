"""The single-rank sweep: one sorted timeline per device and what a window reads off it
(Python builders of per-report objects, named in the SQL headers)."""
