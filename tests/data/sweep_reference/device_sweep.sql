-- The one sweep behind the ledger, the step ledger, collective exposure and idle gaps.
-- Every device with a window contributes its GPU activities (code 0 compute, 1 comm,
-- 2 copy, 3 zero-length, 6 ending before it starts or never: only its start counts), its
-- two window edges (code 4, zero-length) and probe times (code 5: step region edges, starts
-- and ends of NCCL kernels starting in the window; code 7: see origins). Everything is
-- clipped to [keep_from, keep_to], the span of edges and probes: nothing outside it
-- changes what is returned. One order (device, s, e) and running aggregates over it
-- give each row:
--   prev_c / prev_m / prev_p: the furthest end of the compute (plus zero-length rows and
--     window edges) / comm / copy rows before it. A row adds
--     greatest(0, e - greatest(s, prev)) to the union of its set (union lengths by running
--     maximum); a compute or comm row adds greatest(0, e - greatest(s, prev_c, prev_m))
--     to |C u M|, any activity greatest(0, e - greatest(s, prev_c, prev_m, prev_p)) to
--     |all|.
--   the running sums of those additions. At a zero-length row at time t every row before
--     it starts at or before t, so set X covers covered_X(t) = running sum
--     - greatest(0, prev_X - t) of the time before t: X's time in [a, b) is
--     covered_X(b) - covered_X(a), for a and b probed or edges of one device. Only edges
--     and probes need the running sums: the additions are summed per stretch between two
--     of them (a hash aggregate), and the stretches' sums run in order (few rows), which
--     spares a second sort of every row.
-- Returned: the edge and probe rows (code 4, 5, 7) with covered_* at their time t, and
-- every activity row or edge that starts after everything before it ended: it ends the idle
-- gap [gap_start_ns, t] (ends_gap: one inside the window; tied: another row starts at t
-- too; name_hash: hash of its name).
-- All devices share the stream: each device's times are shifted onto its own stretch of
-- one axis, devices one after the other, so the ends of a device never reach the next
-- one's times; running sums are only subtracted within a device. Every window orders
-- its rows explicitly (s, e, code, name_hash: ties broken the same way every time).
-- @reads kernels, device_windows, device_step_regions
-- @column device             BIGINT   CUDA device id.
-- @column code               INTEGER  4: window edge, 5: probe, 7: origin; else the activity row (0 compute, 1 comm, 2 copy, 3 zero-length) that ends an idle gap.
-- @column t                  BIGINT   Time of the row, ns on the report's session clock.
-- @column gap_start_ns       BIGINT   End of everything before the row (the gap it ends starts here), ns.
-- @column ends_gap           BOOLEAN  The row ends an idle gap inside the window.
-- @column tied               BOOLEAN  Another row starts at t too.
-- @column name_hash          UBIGINT  hash() of the name of the activity ending the gap.
-- @column covered_c          BIGINT   Compute time before t (edges and probes only), ns.
-- @column covered_m          BIGINT   Communication time before t, ns.
-- @column covered_p          BIGINT   Copy time before t, ns.
-- @column covered_cm         BIGINT   Compute-or-communication time before t, ns.
-- @column covered_a          BIGINT   Time any activity ran before t, ns.
WITH windows AS (
    SELECT rank, device, window_start_ns, window_end_ns FROM device_windows
),
nccl AS (
    SELECT k.rank, k.device, k.start_ns, k.end_ns
    FROM kernels AS k
    JOIN windows AS w
        ON w.rank = k.rank
        AND w.device = k.device
    WHERE k.kind = 'nccl'
        AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
),
probes AS (
    SELECT r.rank, r.device, unnest([r.start_ns, r.region_end_ns]) AS t
    FROM device_step_regions AS r
    JOIN windows AS w
        ON w.rank = r.rank
        AND w.device = r.device
    WHERE r.start_ns < w.window_end_ns
        AND r.end_ns > w.window_start_ns
        AND r.step >= coalesce($step_from, r.step)
        AND r.step < coalesce($step_to, r.step + 1)
    UNION
    SELECT rank, device, unnest([start_ns, end_ns])
    FROM nccl
),
origins AS (
    -- a device with an NCCL kernel without end: its first activity start (probe code 7),
    -- from where collective_exposure counts compute time absolutely
    SELECT k.rank, k.device, min(k.start_ns) AS t
    FROM kernels AS k
    SEMI JOIN (SELECT rank, device FROM nccl WHERE end_ns IS NULL) AS n
        ON n.rank = k.rank
        AND n.device = k.device
    GROUP BY k.rank, k.device
),
extent AS (
    SELECT
        w.rank,
        w.device,
        w.window_start_ns,
        w.window_end_ns,
        -- what lies before every edge and probe, or after all of them, changes nothing
        -- returned: activities are clipped to [keep_from, keep_to]
        least(w.window_start_ns, min(p.t)) AS keep_from,
        greatest(w.window_end_ns, max(p.t)) AS keep_to
    FROM windows AS w
    LEFT JOIN (SELECT * FROM probes UNION ALL SELECT * FROM origins) AS p
        ON p.rank = w.rank
        AND p.device = w.device
    GROUP BY w.rank, w.device, w.window_start_ns, w.window_end_ns
),
placed AS (
    SELECT
        *,
        row_number() OVER (ORDER BY rank, device)::UINTEGER AS pno,
        -- the device's times [keep_from, keep_to] move to [offset, offset + keep_to - keep_from]
        coalesce(sum(keep_to - keep_from + 1) OVER (
            ORDER BY rank, device ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0)::BIGINT - keep_from AS shift
    FROM extent
),
stream AS (
    SELECT
        d.pno,
        greatest(k.start_ns, d.keep_from) + d.shift AS s,
        -- (a row ending before it starts, or never, only marks its start)
        least(CASE WHEN k.end_ns >= k.start_ns THEN k.end_ns ELSE k.start_ns END, d.keep_to)
            + d.shift AS e,
        CASE WHEN k.name IS NOT NULL THEN hash(k.name) END AS name_hash,
        CASE
            WHEN k.end_ns IS NULL OR k.end_ns < k.start_ns THEN 6
            WHEN k.end_ns = k.start_ns THEN 3
            WHEN k.is_comm THEN 1
            WHEN k.kind IN ('memcpy', 'memset') THEN 2
            ELSE 0
        END::UTINYINT AS code
    FROM kernels AS k
    JOIN placed AS d
        ON d.rank = k.rank
        AND d.device = k.device
    WHERE greatest(k.start_ns, k.end_ns) >= d.keep_from
        AND k.start_ns <= d.keep_to
    UNION ALL
    SELECT
        pno,
        unnest([window_start_ns, window_end_ns]) + shift,
        unnest([window_start_ns, window_end_ns]) + shift,
        NULL,
        4
    FROM placed
    UNION ALL
    SELECT d.pno, p.t + d.shift, p.t + d.shift, NULL, 5
    FROM probes AS p
    JOIN placed AS d
        ON d.rank = p.rank
        AND d.device = p.device
    WHERE p.t IS NOT NULL
    UNION ALL
    SELECT d.pno, o.t + d.shift, o.t + d.shift, NULL, 7
    FROM origins AS o
    JOIN placed AS d
        ON d.rank = o.rank
        AND d.device = o.device
),
previous AS (
    -- in sweep order (s, e, code, name_hash): the furthest end of each set before the row,
    -- and which stretch it is in: the number of edges and probes up to it (each edge or
    -- probe starts a stretch)
    SELECT
        pno,
        s,
        e,
        code,
        name_hash,
        coalesce(lag(s) OVER (ORDER BY s, e, code, name_hash NULLS LAST) = s, FALSE)
            OR coalesce(lead(s) OVER (ORDER BY s, e, code, name_hash NULLS LAST) = s, FALSE)
            AS tied,
        max(e) FILTER (WHERE code IN (0, 3, 4)) OVER before AS prev_c,
        max(e) FILTER (WHERE code = 1) OVER before AS prev_m,
        max(e) FILTER (WHERE code = 2) OVER before AS prev_p,
        sum(CASE WHEN code >= 4 THEN 1 ELSE 0 END) OVER (
            ORDER BY s, e, code, name_hash NULLS LAST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS stretch
    FROM stream
    WINDOW before AS (
        ORDER BY s, e, code, name_hash NULLS LAST
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    )
),
added AS (
    SELECT
        pno,
        s,
        stretch,
        code,
        name_hash,
        tied,
        prev_c,
        prev_m,
        prev_p,
        greatest(0, e - greatest(s, prev_c)) AS add_c,
        greatest(0, e - greatest(s, prev_m)) AS add_m,
        greatest(0, e - greatest(s, prev_p)) AS add_p,
        greatest(0, e - greatest(s, prev_c, prev_m)) AS add_cm,
        greatest(0, e - greatest(s, prev_c, prev_m, prev_p)) AS add_a
    FROM previous
),
stretches AS (
    -- what each stretch adds to each union (an edge or probe, first in its stretch, adds
    -- nothing)
    SELECT
        stretch,
        sum(add_c) FILTER (WHERE code = 0) AS c,
        sum(add_m) FILTER (WHERE code = 1) AS m,
        sum(add_p) FILTER (WHERE code = 2) AS p,
        sum(add_cm) FILTER (WHERE code IN (0, 1)) AS cm,
        sum(add_a) FILTER (WHERE code IN (0, 1, 2)) AS a
    FROM added
    GROUP BY stretch
),
sums AS (
    -- the running sums at the edge or probe that starts stretch `stretch`: the additions
    -- of every stretch before it
    SELECT
        stretch + 1 AS stretch,
        sum(c) OVER running AS sum_c,
        sum(m) OVER running AS sum_m,
        sum(p) OVER running AS sum_p,
        sum(cm) OVER running AS sum_cm,
        sum(a) OVER running AS sum_a
    FROM stretches
    WINDOW running AS (ORDER BY stretch ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
picked AS (
    SELECT
        x.*,
        greatest(x.prev_c, x.prev_m, x.prev_p) AS prev_a,
        u.sum_c,
        u.sum_m,
        u.sum_p,
        u.sum_cm,
        u.sum_a
    FROM added AS x
    LEFT JOIN sums AS u
        ON u.stretch = x.stretch
        AND x.code >= 4
    WHERE x.code >= 4
        OR x.s > greatest(x.prev_c, x.prev_m, x.prev_p)
)
SELECT
    d.rank,
    d.device,
    x.code,
    x.s - d.shift AS t,
    x.prev_a - d.shift AS gap_start_ns,
    coalesce(x.code <= 4 AND x.s > x.prev_a AND x.prev_a - d.shift >= d.window_start_ns
        AND x.s - d.shift <= d.window_end_ns, FALSE) AS ends_gap,
    x.tied,
    x.name_hash,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_c, 0) - greatest(0, x.prev_c - x.s) END::BIGINT
        AS covered_c,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_m, 0) - greatest(0, x.prev_m - x.s) END::BIGINT
        AS covered_m,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_p, 0) - greatest(0, x.prev_p - x.s) END::BIGINT
        AS covered_p,
    CASE WHEN x.code >= 4
        THEN coalesce(x.sum_cm, 0) - greatest(0, greatest(x.prev_c, x.prev_m) - x.s) END::BIGINT
        AS covered_cm,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_a, 0) - greatest(0, x.prev_a - x.s) END::BIGINT
        AS covered_a
FROM picked AS x
JOIN placed AS d
    ON d.pno = x.pno
WHERE x.code <> 6
