-- Union lengths per (rank, device, step) over the region of each step that overlaps the
-- window and is in [step_from, step_to) (the whole region, not only its part in the
-- window): covered_X(region end) - covered_X(region start), looked up in device_timeline.
-- Computed in Python (nsyswrap.device_timeline); this body only types it.
-- @reads device_timeline, device_windows, device_step_regions
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
SELECT
    CAST(NULL AS BIGINT) AS device,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS region_ns,
    CAST(NULL AS BIGINT) AS c_ns,
    CAST(NULL AS BIGINT) AS m_ns,
    CAST(NULL AS BIGINT) AS p_ns,
    CAST(NULL AS BIGINT) AS cm_ns,
    CAST(NULL AS BIGINT) AS a_ns
WHERE FALSE
