-- One row per nsyswrap collective range of one report: an NVTX range whose text is
-- @reads nvtx
-- `coll:<op> bytes=<n> dtype=<t> pg=<group> size=<n> seq=<k>` (see README), with the
-- completion mark of an asynchronous one.
-- Built from the already normalized nvtx of the same report.
-- @column pid BIGINT              Process id.
-- @column tid BIGINT              Thread that issued the collective.
-- @column start_ns BIGINT         Range start, ns on the report's session clock.
-- @column end_ns BIGINT           Range end, ns.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column op VARCHAR              torch.distributed op, e.g. all_reduce.
-- @column bytes BIGINT            Payload bytes of this rank's tensor(s).
-- @column dtype VARCHAR           Tensor dtype, e.g. float32.
-- @column pg VARCHAR              Stable process-group id (same on every rank).
-- @column group_size BIGINT       Ranks in the group.
-- @column seq BIGINT              Per-group sequence number on this rank, from 0.
-- @column done_ns BIGINT          An asynchronous call's completion (ns): its mark
--                                 `coll_done:<op> pg=<group> seq=<k>` (gloo, MPI); NULL
--                                 for calls that return when done and NCCL's.
WITH calls AS (
    SELECT
        pid,
        tid,
        start_ns,
        end_ns,
        dur_ns,
        regexp_extract(text, '^coll:(\S+)', 1) AS op,
        TRY_CAST(nullif(regexp_extract(text, '\bbytes=(\d+)', 1), '') AS BIGINT) AS bytes,
        nullif(regexp_extract(text, '\bdtype=(\S+)', 1), '') AS dtype,
        nullif(regexp_extract(text, '\bpg=(\S+)', 1), '') AS pg,
        TRY_CAST(nullif(regexp_extract(text, '\bsize=(\d+)', 1), '') AS BIGINT) AS group_size,
        TRY_CAST(nullif(regexp_extract(text, '\bseq=(\d+)', 1), '') AS BIGINT) AS seq
    FROM nvtx
    WHERE text LIKE 'coll:%'
        AND event_type <> 'mark'
),
done AS (
    SELECT
        pid,
        regexp_extract(text, '^coll_done:(\S+)', 1) AS op,
        regexp_extract(text, '\bpg=(\S+)', 1) AS pg,
        TRY_CAST(regexp_extract(text, '\bseq=(\d+)', 1) AS BIGINT) AS seq,
        min(start_ns) AS done_ns
    FROM nvtx
    WHERE text LIKE 'coll_done:%'
        AND event_type = 'mark'
    GROUP BY ALL
)
SELECT c.*, d.done_ns
FROM calls AS c
LEFT JOIN done AS d
    USING (pid, op, pg, seq)
