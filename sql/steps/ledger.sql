-- One row per (rank, device, step): the step range's duration and where the time of its
-- region went on the device (compute + comm busy are unions). The region is the step
-- from its start to its end or the next step's start, whichever is first: the five
-- *_only/both/idle parts add up to it, which is duration_ns unless steps overlap (a
-- step that holds no time, e.g. one starting with another of lower number, has all
-- parts 0). Steps are NVTX ranges LIKE step_pattern overlapping the window.
-- @reads step_unions
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column step BIGINT                  Step number.
-- @column start_ns BIGINT              Step range start (session clock ns).
-- @column end_ns BIGINT                Step range end (ns).
-- @column duration_ns BIGINT           end_ns - start_ns.
-- @column compute_busy_ns BIGINT       Union of compute in the region (ns).
-- @column comm_busy_ns BIGINT          Union of communication in the region (ns).
-- @column compute_only_ns BIGINT       Compute without communication (ns).
-- @column exposed_comm_ns BIGINT       Communication without compute (ns).
-- @column both_ns BIGINT               Compute and communication together (ns).
-- @column copy_only_ns BIGINT          Only copies/memsets (ns).
-- @column idle_ns BIGINT               Nothing on any stream of the device in the region (ns).
-- @scope report
-- @order rank, device, step
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
FROM step_unions
ORDER BY rank, device, step
