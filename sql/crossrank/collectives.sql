-- One row per matched collective and rank, in aligned run time. Collectives are
-- matched across ranks by (pg, seq) from the `coll:` ranges when every report
-- has them; otherwise the k-th NCCL kernel of an op on a device is taken to be
-- the same collective on every rank (pg is then 'nccl:<Op>'). A collective is
-- timed by its NCCL kernels (launched inside its range on the same thread) when
-- every rank has them, else by its ranges; a rank with several GPUs is in it
-- from its first kernel start to its last kernel end. Keys that are not on
-- every rank of the group exactly once are left out: see crossrank.mismatches.
-- With step_from / step_to, only collectives of those steps.
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
    CASE WHEN on_gpu THEN 'kernel' ELSE 'nvtx' END AS source
FROM xr_collectives
ORDER BY TRY_CAST(pg AS BIGINT), pg, seq, rank
