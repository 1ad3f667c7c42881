-- idle_gap_rows with the names of the work ending the gaps (the rows carry the name's hash
-- where one kernel ends the gap).
-- @reads idle_gap_rows, kernels
-- @column device             BIGINT   CUDA device id.
-- @column step               BIGINT   Step of the gap (see idle_gap_rows).
-- @column start_ns           BIGINT   Gap start, ns on the report's session clock.
-- @column end_ns             BIGINT   Gap end (ns).
-- @column dur_ns             BIGINT   end_ns - start_ns.
-- @column sync_ns            BIGINT   Host synchronization time inside the gap (ns).
-- @column next_name          VARCHAR  Name of the work ending the gap.
-- @column next_launch_ns     BIGINT   Launch call start of that work (ns).
-- @column cause              VARCHAR  other, sync, host_bound or unknown (see gaps.idle).
WITH names AS (
    -- kernel names by the hash the sweep carries (two names with one hash: fail)
    SELECT
        hash(name) AS name_hash,
        CASE WHEN min(name) = max(name) THEN min(name)
            ELSE error('idle_gaps: two kernel names share a hash') END AS name
    FROM (SELECT DISTINCT name FROM kernels WHERE name IS NOT NULL)
    GROUP BY hash(name)
)
SELECT
    g.rank,
    g.device,
    g.step,
    g.start_ns,
    g.end_ns,
    g.dur_ns,
    g.sync_ns,
    coalesce(g.next_name, n.name) AS next_name,
    g.next_launch_ns,
    g.cause
FROM idle_gap_rows AS g
LEFT JOIN names AS n
    ON n.name_hash = g.next_name_hash
