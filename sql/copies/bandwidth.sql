-- One row per (rank, device, copy direction, source and destination memory kind) of the
-- memory copies in the analysed window: how many, how many bytes, how long, the achieved
-- bandwidth, and the order of magnitude the link it crosses should reach. GB/s are
-- 10^9 bytes per second of summed copy time; a small copy is dominated by its fixed cost,
-- so large_gb_per_s (copies of at least large_bytes) is the figure to hold against the
-- link. Expected, per direction (docs/compute.md, "Copies and GPU memory"): host <-> device
-- 10-64 GB/s (PCIe 3.0 to 5.0 x16; NVLink-C2C on Grace Hopper reaches ~450), device ->
-- device on one GPU 100-4000 GB/s (device memory, read and written), peer 10-900 GB/s
-- (PCIe to NVLink 5), host -> host 1-50 GB/s. A copy from or to pageable host memory is
-- flagged whatever its rate: the driver stages it through a pinned buffer on the host
-- (time its GPU duration does not show) and it cannot overlap other work. Copies
-- overlapping the window count whole.
-- @scope report
-- @reads memcpy, device_windows
-- @param large_bytes BIGINT = 1048576  Copies of at least this many bytes are large.
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column copy_kind VARCHAR            HtoD, DtoH, DtoD, PtoP, HtoH, ... (memcpy.copy_kind).
-- @column src_kind VARCHAR             Source memory: Pageable, Pinned, Device, ...
-- @column dst_kind VARCHAR             Destination memory, as src_kind.
-- @column link VARCHAR                 What the copy crosses: host link, device memory,
--                                      peer link, host memory, or other.
-- @column copies BIGINT                Number of copies.
-- @column bytes BIGINT                 Bytes copied.
-- @column dur_ns BIGINT                Summed duration (ns).
-- @column gb_per_s DOUBLE              bytes / dur_ns (GB/s; NULL when dur_ns is 0).
-- @column large_copies BIGINT          Copies of at least large_bytes.
-- @column large_gb_per_s DOUBLE        Their bytes / their summed duration (GB/s).
-- @column expected_low_gb_per_s DOUBLE  Low end of the link's expected order (GB/s).
-- @column expected_high_gb_per_s DOUBLE High end (GB/s).
-- @column pageable BOOLEAN             Host memory is pageable (slow, cannot overlap).
-- @column vs_expected VARCHAR          below, within or above the expected range
--                                      (large copies; NULL without large copies).
-- @order rank, device, bytes DESC, copy_kind, src_kind, dst_kind
WITH expected(copy_kind, link, low, high) AS (
    VALUES
        ('HtoD', 'host link', 10.0, 64.0),
        ('DtoH', 'host link', 10.0, 64.0),
        ('DtoD', 'device memory', 100.0, 4000.0),
        ('PtoP', 'peer link', 10.0, 900.0),
        ('HtoH', 'host memory', 1.0, 50.0)
),
copies AS (
    SELECT
        c.rank,
        c.device,
        c.copy_kind,
        c.src_kind,
        c.dst_kind,
        count(*) AS copies,
        sum(c.bytes)::BIGINT AS bytes,
        sum(c.dur_ns)::BIGINT AS dur_ns,
        count(*) FILTER (WHERE c.bytes >= $large_bytes) AS large_copies,
        sum(c.bytes) FILTER (WHERE c.bytes >= $large_bytes) AS large_bytes,
        sum(c.dur_ns) FILTER (WHERE c.bytes >= $large_bytes) AS large_ns
    FROM memcpy AS c
    JOIN device_windows AS w
        ON w.rank = c.rank
        AND w.device = c.device
    WHERE (c.start_ns < w.window_end_ns AND c.end_ns > w.window_start_ns)
        OR (c.dur_ns = 0 AND c.start_ns BETWEEN w.window_start_ns AND w.window_end_ns)
    GROUP BY c.rank, c.device, c.copy_kind, c.src_kind, c.dst_kind
),
judged AS (
    SELECT
        c.*,
        'Pageable' IN (c.src_kind, c.dst_kind) AS pageable,
        c.large_bytes / nullif(c.large_ns, 0) AS large_gb_per_s
    FROM copies AS c
)
SELECT
    j.rank,
    j.device,
    j.copy_kind,
    j.src_kind,
    j.dst_kind,
    coalesce(e.link, 'other') AS link,
    j.copies,
    j.bytes,
    j.dur_ns,
    j.bytes / nullif(j.dur_ns, 0) AS gb_per_s,
    j.large_copies,
    j.large_gb_per_s::DOUBLE AS large_gb_per_s,
    e.low::DOUBLE AS expected_low_gb_per_s,
    e.high::DOUBLE AS expected_high_gb_per_s,
    j.pageable,
    CASE
        WHEN j.large_gb_per_s IS NULL OR e.low IS NULL THEN NULL
        WHEN j.large_gb_per_s < e.low THEN 'below'
        WHEN j.large_gb_per_s > e.high THEN 'above'
        ELSE 'within'
    END AS vs_expected
FROM judged AS j
LEFT JOIN expected AS e
    ON e.copy_kind = j.copy_kind
ORDER BY j.rank, j.device, j.bytes DESC, j.copy_kind, j.src_kind, j.dst_kind
