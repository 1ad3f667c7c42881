-- Union lengths per (rank, device, step) over the region of each step that overlaps the
-- window and is in [step_from, step_to) (the whole region, not only its part in the
-- window): covered_X(region end) - covered_X(region start).
-- @reads device_sweep, device_windows, device_step_regions
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column device             BIGINT   CUDA device id.
-- @column step               BIGINT   Step number.
-- @column start_ns           BIGINT   Step range start (session clock ns).
-- @column end_ns             BIGINT   Step range end (ns).
-- @column region_ns          BIGINT   Length of the step's region (ns; 0 if it holds no time).
-- @column c_ns               BIGINT   Union of compute in the region (ns).
-- @column m_ns               BIGINT   Union of communication (ns).
-- @column p_ns               BIGINT   Union of copies (ns).
-- @column cm_ns              BIGINT   Union of compute and communication (ns).
-- @column a_ns               BIGINT   Union of every activity (ns).
WITH probes AS (
    SELECT *
    FROM device_sweep
    WHERE code = 5
),
regions AS (
    -- the steps that overlap the window and lie in [step_from, step_to)
    SELECT
        r.*,
        coalesce(r.region_end_ns > r.start_ns, FALSE) AS holds_time
    FROM device_step_regions AS r
    JOIN device_windows AS w
        ON w.rank = r.rank
        AND w.device = r.device
    WHERE r.start_ns < w.window_end_ns
        AND r.end_ns > w.window_start_ns
        AND r.step >= coalesce($step_from, r.step)
        AND r.step < coalesce($step_to, r.step + 1)
)
SELECT
    r.rank,
    r.device,
    r.step,
    r.start_ns,
    r.end_ns,
    CASE WHEN r.holds_time THEN r.region_end_ns - r.start_ns ELSE 0 END AS region_ns,
    CASE WHEN r.holds_time THEN b.covered_c - a.covered_c ELSE 0 END::BIGINT AS c_ns,
    CASE WHEN r.holds_time THEN b.covered_m - a.covered_m ELSE 0 END::BIGINT AS m_ns,
    CASE WHEN r.holds_time THEN b.covered_p - a.covered_p ELSE 0 END::BIGINT AS p_ns,
    CASE WHEN r.holds_time THEN b.covered_cm - a.covered_cm ELSE 0 END::BIGINT AS cm_ns,
    CASE WHEN r.holds_time THEN b.covered_a - a.covered_a ELSE 0 END::BIGINT AS a_ns
FROM regions AS r
LEFT JOIN probes AS a
    ON a.rank = r.rank
    AND a.device = r.device
    AND a.t = r.start_ns
LEFT JOIN probes AS b
    ON b.rank = r.rank
    AND b.device = r.device
    AND b.t = r.region_end_ns
