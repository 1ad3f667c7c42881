-- One row per matched collective and rank, in aligned run time. Collectives are
-- matched across ranks by (pg, seq) from the `coll:` ranges when every report
-- has them (or NCCL's payloads, or MPI's ranges); otherwise from the NCCL kernels
-- per stream: the k-th kernel of a stream is the group's k-th operation, the
-- groups inferred (see crossrank.groups; pg 'nccl:<k>' for true barriers,
-- 'nccl:x<k>' for all_to_all and send/recv). A collective is timed by its NCCL
-- kernels (launched inside its range on the same thread) when every rank has
-- them, else by its ranges; a rank with several GPUs is in it from its first
-- kernel start to its last kernel end. An all_to_all or send/recv member ends
-- when its own transfers are done, so its members' ends differ (barrier false).
-- Keys that are not on every rank of the group exactly once are left out: see
-- crossrank.mismatches. With step_from / step_to, only collectives of those steps.
-- @scope run
-- @reads xr_collectives
-- @column pg VARCHAR               Process group id.
-- @column seq BIGINT               Sequence number in its group.
-- @column op VARCHAR               Collective, e.g. all_reduce.
-- @column step BIGINT              Step (`step:<i>` range) it was issued in.
-- @column bytes BIGINT             Payload bytes from the range, if known.
-- @column rank INTEGER             Rank of the report.
-- @column start_ns BIGINT          Arrival on this rank, ns of run time (since
--                                  the reference rank's aligned session start).
-- @column end_ns BIGINT            End on this rank, ns of run time.
-- @column dur_ns BIGINT            end_ns - start_ns.
-- @column wait_ns BIGINT           Time inside the collective before the last
--                                  rank arrived (ns).
-- @column lag_ns BIGINT            Arrival minus the median arrival (ns).
-- @column last_rank INTEGER        Rank that arrived last (lowest on ties).
-- @column skew_ns BIGINT           Latest minus earliest arrival (ns).
-- @column transfer_ns BIGINT       Shortest duration across ranks (ns).
-- @column source VARCHAR           kernel (NCCL kernel times) or nvtx (ranges).
-- @column barrier BOOLEAN          Its members end together (all_reduce,
--                                  all_gather, reduce_scatter, barrier): the
--                                  clock solve uses only these.
SELECT
    pg,
    seq,
    op,
    step,
    bytes,
    rank,
    start_ns,
    end_ns,
    end_ns - start_ns AS dur_ns,
    wait_ns,
    lag_ns,
    last_rank,
    skew_ns,
    transfer_ns,
    CASE WHEN on_gpu THEN 'kernel' ELSE 'nvtx' END AS source,
    barrier
FROM xr_collectives
ORDER BY TRY_CAST(pg AS BIGINT), pg, seq, rank
