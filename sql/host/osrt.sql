-- One row per (rank, process, OS runtime function) called in the analysed window (nsys
-- --trace=osrt, which nsyswrap launch traces by default): how often, how long in total,
-- the median and longest call, and how much of that time fell on the threads that call
-- CUDA (those that launch the GPU's work), as nsys stats osrt_sum. Waits on idle helper
-- threads (pthread_cond_wait, poll, epoll_wait in a data loader or a communication
-- thread) are long but harmless; on a CUDA thread they hold back the next launch: a
-- host-blocked step's cause. Calls nested in another traced call count too. The window
-- is the span of the report's device windows; a report without GPU work counts every
-- call. Empty when the OS runtime was not traced. Longest total first.
-- @scope report
-- @reads osrt_calls, api_calls, device_windows
-- @column rank INTEGER                 Rank of the process.
-- @column pid BIGINT                   Process id.
-- @column api VARCHAR                  Function, e.g. pthread_cond_wait.
-- @column calls BIGINT                 Calls starting in the window.
-- @column threads BIGINT               Threads that made them.
-- @column total_ns BIGINT              Their summed duration (ns).
-- @column cuda_thread_ns BIGINT        Of which on threads that call CUDA (ns).
-- @column median_ns DOUBLE             Median call (ns).
-- @column max_ns BIGINT                Longest call (ns).
-- @order rank, total_ns DESC, api, pid
WITH span AS (
    SELECT rank, min(window_start_ns) AS start_ns, max(window_end_ns) AS end_ns
    FROM device_windows
    GROUP BY rank
),
cuda_threads AS (
    SELECT DISTINCT rank, pid, tid FROM api_calls
)
SELECT
    o.rank,
    o.pid,
    o.api,
    count(*) AS calls,
    count(DISTINCT o.tid) AS threads,
    sum(o.dur_ns)::BIGINT AS total_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE c.tid IS NOT NULL), 0)::BIGINT AS cuda_thread_ns,
    quantile_cont(o.dur_ns, 0.5) AS median_ns,
    max(o.dur_ns) AS max_ns
FROM osrt_calls AS o
LEFT JOIN span AS s
    ON s.rank = o.rank
LEFT JOIN cuda_threads AS c
    ON c.rank = o.rank
    AND c.pid = o.pid
    AND c.tid = o.tid
WHERE s.rank IS NULL
    OR o.start_ns BETWEEN s.start_ns AND s.end_ns
GROUP BY o.rank, o.pid, o.api
ORDER BY o.rank, total_ns DESC, o.api, o.pid
