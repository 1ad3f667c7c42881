-- One row per (rank, process, kind, kernel name): how often it ran and for how long.
-- Covers kernels, memcpy and memset on every device and stream, longest total first.
-- @reads kernels
-- @param min_dur_ns BIGINT = 0     Ignore activities shorter than this (ns).
-- @column rank INTEGER             Rank of the process (a report may hold several).
-- @column pid BIGINT               Process id.
-- @column kind VARCHAR             compute, nccl, memcpy, memset or other.
-- @column name VARCHAR             Kernel short name, or "memcpy <kind>" / "memset".
-- @column count BIGINT             Number of runs.
-- @column total_ns BIGINT          Summed duration (ns); overlapping runs count twice.
-- @column avg_ns DOUBLE            Mean duration (ns).
-- @column min_ns BIGINT            Shortest run (ns).
-- @column max_ns BIGINT            Longest run (ns).
-- @scope report
-- @order rank, total_ns DESC, name, pid
SELECT
    rank,
    pid,
    kind,
    name,
    count(*) AS count,
    sum(dur_ns)::BIGINT AS total_ns,
    avg(dur_ns) AS avg_ns,
    min(dur_ns) AS min_ns,
    max(dur_ns) AS max_ns
FROM kernels
WHERE dur_ns >= $min_dur_ns
GROUP BY rank, pid, kind, name
ORDER BY rank, total_ns DESC, name, pid
