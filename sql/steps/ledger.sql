-- One row per (rank, device, step): the step range's duration and where it went on
-- the device (compute + comm busy are unions; the five *_only/both/idle parts add up
-- to duration_ns). Steps are NVTX ranges LIKE step_pattern overlapping the window.
-- @param window_nvtx VARCHAR = NULL    Only steps overlapping NVTX ranges LIKE this.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges, e.g.
--                                      ProfilerStep#%; the number is the text's last one.
-- @param step_from BIGINT = NULL       Only steps >= this number.
-- @param step_to BIGINT = NULL         Only steps < this number.
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column step BIGINT                  Step number.
-- @column start_ns BIGINT              Step range start (session clock ns).
-- @column end_ns BIGINT                Step range end (ns).
-- @column duration_ns BIGINT           end_ns - start_ns.
-- @column compute_busy_ns BIGINT       Union of compute in the step (ns).
-- @column comm_busy_ns BIGINT          Union of communication in the step (ns).
-- @column compute_only_ns BIGINT       Compute without communication (ns).
-- @column exposed_comm_ns BIGINT       Communication without compute (ns).
-- @column both_ns BIGINT               Compute and communication together (ns).
-- @column copy_only_ns BIGINT          Only copies/memsets (ns).
-- @column idle_ns BIGINT               Nothing on any stream of the device (ns).
WITH win AS (
    SELECT * FROM analysis_window($window_nvtx, $step_pattern, $step_from, $step_to)
),
steps AS (
    SELECT s.*
    FROM device_steps($step_pattern) AS s
    JOIN win AS w
        ON w.rank = s.rank
        AND w.device = s.device
    WHERE s.start_ns < w.window_end_ns
        AND s.end_ns > w.window_start_ns
        AND s.step >= coalesce($step_from, s.step)
        AND s.step < coalesce($step_to, s.step + 1)
),
parts AS (
    SELECT
        rank,
        device,
        step,
        sum(dur_ns) FILTER (WHERE n_compute > 0) AS compute_busy_ns,
        sum(dur_ns) FILTER (WHERE n_comm > 0) AS comm_busy_ns,
        sum(dur_ns) FILTER (WHERE n_compute > 0 AND n_comm = 0) AS compute_only_ns,
        sum(dur_ns) FILTER (WHERE n_comm > 0 AND n_compute = 0) AS comm_only_ns,
        sum(dur_ns) FILTER (WHERE n_compute > 0 AND n_comm > 0) AS both_ns,
        sum(dur_ns) FILTER (WHERE n_compute = 0 AND n_comm = 0 AND n_copy > 0)
            AS copy_only_ns,
        sum(dur_ns) FILTER (WHERE n_compute = 0 AND n_comm = 0 AND n_copy = 0) AS idle_ns
    FROM gpu_timeline($window_nvtx, $step_pattern, $step_from, $step_to)
    WHERE step IS NOT NULL
    GROUP BY rank, device, step
)
SELECT
    s.rank,
    s.device,
    s.step,
    s.start_ns,
    s.end_ns,
    s.end_ns - s.start_ns AS duration_ns,
    coalesce(p.compute_busy_ns, 0)::BIGINT AS compute_busy_ns,
    coalesce(p.comm_busy_ns, 0)::BIGINT AS comm_busy_ns,
    coalesce(p.compute_only_ns, 0)::BIGINT AS compute_only_ns,
    coalesce(p.comm_only_ns, 0)::BIGINT AS exposed_comm_ns,
    coalesce(p.both_ns, 0)::BIGINT AS both_ns,
    coalesce(p.copy_only_ns, 0)::BIGINT AS copy_only_ns,
    coalesce(p.idle_ns, 0)::BIGINT AS idle_ns
FROM steps AS s
LEFT JOIN parts AS p
    ON p.rank = s.rank
    AND p.device = s.device
    AND p.step = s.step
ORDER BY s.rank, s.device, s.step
