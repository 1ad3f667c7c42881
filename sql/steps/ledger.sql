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
-- @scope rank                     Each rank's rows depend on its report only.
SELECT
    rank,
    device,
    step,
    start_ns,
    end_ns,
    end_ns - start_ns AS duration_ns,
    c_ns AS compute_busy_ns,
    m_ns AS comm_busy_ns,
    cm_ns - m_ns AS compute_only_ns,
    cm_ns - c_ns AS exposed_comm_ns,
    c_ns + m_ns - cm_ns AS both_ns,
    a_ns - cm_ns AS copy_only_ns,
    (region_ns - a_ns)::BIGINT AS idle_ns
FROM step_unions($window_nvtx, $step_pattern, $step_from, $step_to)
ORDER BY rank, device, step
