-- Idle gaps per (rank, device) inside the window: maximal stretches where no activity
-- runs on any stream (a zero-length activity splits a gap), with the host sync time
-- inside and the launch call of the work that ends the gap. cause: other (that work was
-- launched before the GPU went idle), else sync (host syncs cover at least half the
-- gap), host_bound (launched after the GPU went idle) or unknown (no launch record).
-- step: the step region holding the gap start, else the first one starting inside the
-- gap.
-- @reads device_sweep, device_step_regions, device_sync_islands, kernels, launches
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
-- @column next_name_hash     UBIGINT  hash() of the name of the one kernel ending the gap.
-- @column next_name          VARCHAR  Name of the work ending the gap when several rows start there.
-- @column next_launch_ns     BIGINT   Launch call start of the work ending the gap (ns).
-- @column cause              VARCHAR  other, sync, host_bound or unknown (see gaps.idle).
WITH raw_gaps AS (
    SELECT
        rank,
        device,
        gap_start_ns AS start_ns,
        t AS end_ns,
        tied,
        code,
        name_hash
    FROM device_sweep
    WHERE ends_gap
),
regions AS (
    -- every step region with the next one that holds any time (of steps starting
    -- together, the one holding the time)
    SELECT
        rank,
        device,
        arg_min(step, step) AS step,
        start_ns,
        arg_min(end_ns, step) AS end_ns,
        arg_min(next_start_ns, step) AS next_start_ns,
        arg_min(next_step, step) AS next_step
    FROM (
        SELECT
            *,
            first_value(CASE WHEN region_end_ns > start_ns THEN start_ns END IGNORE NULLS)
                OVER w AS next_start_ns,
            first_value(CASE WHEN region_end_ns > start_ns THEN step END IGNORE NULLS)
                OVER w AS next_step
        FROM device_step_regions
        WINDOW w AS (
            PARTITION BY rank, device
            ORDER BY start_ns, step DESC
            ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
        )
    )
    GROUP BY rank, device, start_ns
),
islands AS (
    SELECT * FROM device_sync_islands
),
marks AS (
    -- per device, the start times of regions and sync islands, each with the latest
    -- region and sync island started by then
    SELECT
        rank,
        device,
        t,
        last_value(region IGNORE NULLS) OVER w AS region,
        last_value(island IGNORE NULLS) OVER w AS island
    FROM (
        SELECT
            rank,
            device,
            t,
            arg_min(region, region.step) AS region,
            any_value(island) AS island
        FROM (
            SELECT
                rank,
                device,
                start_ns AS t,
                {'step': step, 'start_ns': start_ns, 'end_ns': end_ns} AS region,
                NULL::STRUCT(start_ns BIGINT, end_ns BIGINT, before_ns HUGEINT) AS island
            FROM regions
            UNION ALL
            SELECT
                rank,
                device,
                start_ns,
                NULL,
                {'start_ns': start_ns, 'end_ns': end_ns, 'before_ns': before_ns}
            FROM islands
        )
        GROUP BY rank, device, t
    )
    WINDOW w AS (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING)
),
looked AS (
    -- the latest region and sync island starting at or before the gap end
    SELECT
        g.*,
        m.region,
        m.island,
        coalesce(m.region.start_ns > g.start_ns OR m.island.start_ns > g.start_ns, FALSE)
            AS inside
    FROM raw_gaps AS g
    ASOF LEFT JOIN marks AS m
        ON m.rank = g.rank
        AND m.device = g.device
        AND g.end_ns >= m.t
),
gaps AS (
    -- neither starts inside the gap: they are also the latest at its start, and settle
    -- the step (the region holding the start) and the sync time
    SELECT
        rank,
        device,
        start_ns,
        end_ns,
        tied,
        code,
        name_hash,
        CASE WHEN start_ns < region.end_ns THEN region.step END AS step,
        CASE
            WHEN island IS NULL THEN 0
            -- (least() skips NULLs: only with an island)
            ELSE least(end_ns, island.end_ns) - least(start_ns, island.end_ns)
        END AS sync_ns
    FROM looked
    WHERE NOT inside
    UNION ALL
    -- a region or sync island starts inside: look both up at the gap start
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        g.end_ns,
        g.tied,
        g.code,
        g.name_hash,
        CASE
            WHEN r.start_ns IS NULL AND f.first_start_ns < g.end_ns THEN f.first_step
            WHEN g.start_ns < r.end_ns THEN r.step
            WHEN r.next_start_ns < g.end_ns THEN r.next_step
        END,
        (coalesce(g.island.before_ns + least(g.end_ns, g.island.end_ns) - g.island.start_ns, 0)
            - coalesce(s.before_ns + least(g.start_ns, s.end_ns) - s.start_ns, 0))::BIGINT
    FROM (SELECT * FROM looked WHERE inside) AS g
    LEFT JOIN (
        SELECT
            rank,
            device,
            arg_min(start_ns, (start_ns, step)) AS first_start_ns,
            arg_min(step, (start_ns, step)) AS first_step
        FROM device_step_regions
        WHERE region_end_ns > start_ns
        GROUP BY rank, device
    ) AS f
        ON f.rank = g.rank
        AND f.device = g.device
    ASOF LEFT JOIN regions AS r
        ON r.rank = g.rank
        AND r.device = g.device
        AND g.start_ns >= r.start_ns
    ASOF LEFT JOIN islands AS s
        ON s.rank = g.rank
        AND s.device = g.device
        AND g.start_ns >= s.start_ns
),
untied AS (
    -- no other row starts at the gap end: the kernel ending the gap (if any) is the only
    -- one starting there, and a launches row for that start is its own
    SELECT g.*, l.start_ns AS next_launch_ns
    FROM (SELECT * FROM gaps WHERE NOT tied) AS g
    LEFT JOIN launches AS l
        ON l.rank = g.rank
        AND l.device = g.device
        AND l.kernel_start_ns = g.end_ns
),
looked_up AS (
    -- the work starting at the end of a gap where that takes a look: several rows start
    -- there, or the one that does has no launches row of its own. Per gap end, the first
    -- launch call of their correlation ids and the name of the first launched (else, and
    -- among those launched together, the least name).
    SELECT
        k.rank,
        k.device,
        k.start_ns,
        min(l.start_ns) AS launch_ns,
        coalesce(
            arg_min(k.name, (l.start_ns, k.name)) FILTER (WHERE l.start_ns IS NOT NULL),
            min(k.name)
        ) AS name
    FROM kernels AS k
    SEMI JOIN (
        SELECT rank, device, end_ns FROM gaps WHERE tied
        UNION ALL
        SELECT rank, device, end_ns FROM untied WHERE next_launch_ns IS NULL
    ) AS g
        ON g.rank = k.rank
        AND g.device = k.device
        AND g.end_ns = k.start_ns
    LEFT JOIN launches AS l
        ON l.rank = k.rank
        AND l.pid = k.pid
        AND l.correlation_id = k.correlation_id
    GROUP BY k.rank, k.device, k.start_ns
),
named AS (
    SELECT rank, device, start_ns, end_ns, step, sync_ns, name_hash, next_launch_ns,
        NULL AS next_name
    FROM untied
    WHERE next_launch_ns IS NOT NULL
        OR code = 4
    UNION ALL
    -- no launches row of its own: the launch call of its correlation id, if any; several
    -- rows start at the gap end: the first launch call and the name (see looked_up)
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        g.end_ns,
        g.step,
        g.sync_ns,
        CASE WHEN NOT g.tied THEN g.name_hash END,
        w.launch_ns,
        CASE WHEN g.tied THEN w.name END
    FROM (
        SELECT * FROM untied WHERE next_launch_ns IS NULL AND code <> 4
        UNION ALL BY NAME
        SELECT * FROM gaps WHERE tied
    ) AS g
    LEFT JOIN looked_up AS w
        ON w.rank = g.rank
        AND w.device = g.device
        AND w.start_ns = g.end_ns
)
SELECT
    rank,
    device,
    step,
    start_ns,
    end_ns,
    end_ns - start_ns AS dur_ns,
    sync_ns::BIGINT AS sync_ns,
    name_hash AS next_name_hash,
    next_name,
    next_launch_ns,
    CASE
        WHEN next_launch_ns < start_ns THEN 'other'
        WHEN 2 * sync_ns >= end_ns - start_ns THEN 'sync'
        WHEN next_launch_ns IS NOT NULL THEN 'host_bound'
        ELSE 'unknown'
    END AS cause
FROM named
