-- One row per (rank, device, compute kernel name, class) of the kernels in the analysed
-- window: how often the kernel ran and its duration statistics, read by kernels.top and
-- kernels.tensor_cores (one pass over the kernels for both). A kernel is in the window
-- when it overlaps it (a zero-length one: lies in it); its whole duration counts. The
-- class (matmul, attention, other) is kernel_class of its short and demangled name,
-- computed once per distinct name.
-- @include kernel_classes
-- @reads kernels, device_windows
-- @column device             BIGINT   CUDA device id.
-- @column name               VARCHAR  Kernel short name.
-- @column class              VARCHAR  matmul, attention or other (kernel_class).
-- @column kernels            BIGINT   Runs in the window.
-- @column total_ns           BIGINT   Their summed duration (ns).
-- @column p10_ns             DOUBLE   10th percentile duration (ns).
-- @column p50_ns             DOUBLE   Median duration (ns).
-- @column p90_ns             DOUBLE   90th percentile duration (ns).
-- @column max_ns             BIGINT   Longest run (ns).
WITH names AS (
    SELECT DISTINCT name, demangled
    FROM kernels
    WHERE kind = 'compute'
),
classes AS (
    SELECT name, demangled, kernel_class(name, demangled) AS class
    FROM names
),
stats AS (
    SELECT
        k.rank,
        k.device,
        k.name,
        c.class,
        count(*) AS kernels,
        sum(k.dur_ns)::BIGINT AS total_ns,
        quantile_cont(k.dur_ns, [0.1, 0.5, 0.9]) AS q,
        max(k.dur_ns) AS max_ns
    FROM kernels AS k
    JOIN device_windows AS w
        ON w.rank = k.rank
        AND w.device = k.device
    JOIN classes AS c
        ON c.name = k.name
        AND c.demangled IS NOT DISTINCT FROM k.demangled
    WHERE k.kind = 'compute'
        AND ((k.start_ns < w.window_end_ns AND k.end_ns > w.window_start_ns)
            OR (k.dur_ns = 0 AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns))
    GROUP BY k.rank, k.device, k.name, c.class
)
SELECT
    rank,
    device,
    name,
    class,
    kernels,
    total_ns,
    q[1] AS p10_ns,
    q[2] AS p50_ns,
    q[3] AS p90_ns,
    max_ns
FROM stats
