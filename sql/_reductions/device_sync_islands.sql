-- One row per merged host-sync interval of a device (sync_islands), computed once per
-- report (whatever the window): covered(t) = before_ns + least(t, end_ns) - start_ns for
-- the last island starting at or before t (0 before the first).
-- @include metrics
-- @column device             BIGINT   CUDA device id.
-- @column start_ns           BIGINT   Island start, ns on the report's session clock.
-- @column end_ns             BIGINT   Island end (ns).
-- @column before_ns          BIGINT   Host sync time before the island (ns).
SELECT rank, device, start_ns, end_ns, before_ns::BIGINT AS before_ns
FROM sync_islands()
