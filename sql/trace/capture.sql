-- One row per report: what the capture recorded, for telling whether two runs were
-- captured alike (nsyswrap diff's comparability check): nsys version and how many rows
-- of each kind of trace it holds; and what nsys says it traced (so that a hint to
-- capture something is given only where it was not: nsyswrap.report.captured).
-- @scope report
-- @reads session, kernels, api_calls, nvtx, collectives
-- @column rank INTEGER               Rank of the report.
-- @column nsys_version VARCHAR       nsys version that exported it (NULL if not recorded).
-- @column gpu_activity BIGINT        GPU activities (kernels, copies, sets): --trace=cuda.
-- @column cuda_api BIGINT            CUDA runtime and driver calls: --trace=cuda.
-- @column nvtx BIGINT                NVTX ranges and marks: --trace=nvtx.
-- @column collective_ranges BIGINT   nsyswrap's collective ranges (annotate collectives).
-- @column traced VARCHAR             What nsys recorded tracing, as session.traced
--                                    (cuda, nvtx, osrt, ...; NULL: not recorded).
-- @order rank
SELECT
    s.rank,
    s.nsys_version,
    (SELECT count(*) FROM kernels AS x WHERE x.rank = s.rank) AS gpu_activity,
    (SELECT count(*) FROM api_calls AS x WHERE x.rank = s.rank) AS cuda_api,
    (SELECT count(*) FROM nvtx AS x WHERE x.rank = s.rank) AS nvtx,
    (SELECT count(*) FROM collectives AS x WHERE x.rank = s.rank) AS collective_ranges,
    s.traced
FROM session AS s
ORDER BY s.rank
