-- Idle gaps per (rank, device) inside the window: the idle stretches of device_timeline
-- (nothing runs on any stream; a zero-length activity splits one) cut at the window's
-- edges, with the host sync time inside and the work that ends the gap. cause: other (that
-- work was launched before the GPU went idle), else sync (host syncs cover at least half
-- the gap), host_bound (launched after the GPU went idle) or unknown (no launch record).
-- step: the step region holding the gap start, else the first one starting inside the
-- gap. Computed in Python (nsyswrap.device_timeline); this body only types it.
-- @reads device_timeline, device_windows, device_step_regions, device_sync_islands
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column device             BIGINT   CUDA device id.
-- @column step               BIGINT   Step region holding the gap start (else the first starting inside it).
-- @column start_ns           BIGINT   Gap start, ns on the report's session clock.
-- @column end_ns             BIGINT   Gap end (ns).
-- @column dur_ns             BIGINT   end_ns - start_ns.
-- @column sync_ns            BIGINT   Host synchronization time inside the gap (ns).
-- @column next_name          VARCHAR  Name of the work ending the gap (of work starting together: the first launched, else the least name).
-- @column next_launch_ns     BIGINT   First launch call of the work ending the gap (ns).
-- @column cause              VARCHAR  other, sync, host_bound or unknown (see gaps.idle).
SELECT
    CAST(NULL AS BIGINT) AS device,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS dur_ns,
    CAST(NULL AS BIGINT) AS sync_ns,
    CAST(NULL AS VARCHAR) AS next_name,
    CAST(NULL AS BIGINT) AS next_launch_ns,
    CAST(NULL AS VARCHAR) AS cause
WHERE FALSE
