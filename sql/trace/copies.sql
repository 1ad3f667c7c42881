-- One row per (rank, process, copy direction, source and destination memory kind): how
-- many memory copies, how many bytes and how long. Pageable host memory is slow and
-- cannot overlap (pinned-memory advice needs it). Most copies first.
-- @scope report
-- @reads memcpy
-- @column rank INTEGER        Rank of the process (of the report when it holds one rank).
-- @column pid BIGINT          Process that issued the copies.
-- @column copy_kind VARCHAR   HtoD, DtoH, DtoD, PtoP, ... (see memcpy.copy_kind).
-- @column src_kind VARCHAR    Source memory: Pageable, Pinned, Device, ...
-- @column dst_kind VARCHAR    Destination memory, as src_kind.
-- @column copies BIGINT       Number of copies.
-- @column bytes BIGINT        Bytes copied.
-- @column dur_ns BIGINT       Summed duration (ns); overlapping copies count twice.
-- @order rank, pid, copies DESC, copy_kind, src_kind, dst_kind
SELECT
    rank,
    pid,
    copy_kind,
    src_kind,
    dst_kind,
    count(*) AS copies,
    sum(bytes)::BIGINT AS bytes,
    sum(dur_ns)::BIGINT AS dur_ns
FROM memcpy
GROUP BY ALL
ORDER BY rank, pid, copies DESC, copy_kind, src_kind, dst_kind
