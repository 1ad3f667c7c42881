-- One row per (step, rank, phase): how much longer the phase took on this rank
-- than on the median rank. Phases are the ranges nested directly inside a
-- `step:<i>` range on the same thread (e.g. data_loading, forward, backward,
-- optimizer, or any user range; `coll:` ranges are not phases). A phase is
-- measured on the host (its duration minus the time the thread waited in CUDA
-- synchronize calls and collective ranges started inside it: waiting for others
-- is not lag) and on the GPU (time of the compute kernels launched inside it,
-- since slow GPU work need not lengthen the host range). A phase that occurs
-- several times in a step counts summed.
-- @scope run
-- @reads xr_phase_lag
-- @column step BIGINT              Step index from `step:<i>`.
-- @column rank INTEGER             Rank of the report.
-- @column phase VARCHAR            Text of the range.
-- @column dur_ns BIGINT            Summed range duration in the step (ns).
-- @column host_ns BIGINT           dur_ns less the waits inside it (ns).
-- @column host_median_ns BIGINT    Median host_ns of the ranks with it (ns).
-- @column gpu_ns BIGINT            GPU time of compute kernels launched in it.
-- @column gpu_median_ns BIGINT     Median gpu_ns of the ranks with it (ns).
-- @column excess_ns BIGINT         This rank's lag in the phase: the larger of
--                                  host_ns - host_median_ns and gpu_ns -
--                                  gpu_median_ns.
SELECT
    step,
    rank,
    phase,
    dur_ns,
    host_ns,
    host_median_ns,
    gpu_ns,
    gpu_median_ns,
    greatest(host_ns - host_median_ns, gpu_ns - gpu_median_ns) AS excess_ns
FROM xr_phase_lag
ORDER BY step, rank, phase
