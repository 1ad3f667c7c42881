-- One row per report: whether the trace records tensor shapes, from which the FLOPs of
-- each operation could be counted. Two signs: NVTX ranges whose text lists the shapes
-- (`sizes = [[...]]`: nsys --pytorch=autograd-shapes-nvtx, PyTorch's emit_nvtx with
-- record_shapes) and NVTX payload schema entries named shape(s), sizes or dims
-- (nsys 2026.5 --pytorch=functions-trace-shapes stores shapes as binary payloads, in the
-- export only with --include-blobs=true). nsyswrap does not count FLOPs from shapes:
-- MFU takes the FLOPs per step as given (compute.mfu).
-- @scope report
-- @reads session, nvtx, payload_schemas
-- @column rank INTEGER                 Rank of the report.
-- @column ranges_with_shapes BIGINT    NVTX ranges whose text lists tensor sizes.
-- @column shape_payload_entries BIGINT NVTX payload schema entries named shape, shapes,
--                                      sizes or dims.
-- @order rank
WITH texts AS (
    SELECT rank, count(*) FILTER (WHERE text LIKE '%sizes = [%') AS n
    FROM nvtx
    WHERE event_type <> 'mark'
    GROUP BY rank
),
entries AS (
    SELECT
        rank,
        count(*) FILTER (
            WHERE regexp_matches(lower(name), '\bshapes?\b|\bsizes\b|\bdims\b')
        ) AS n
    FROM payload_schemas
    GROUP BY rank
)
SELECT
    s.rank,
    coalesce(t.n, 0)::BIGINT AS ranges_with_shapes,
    coalesce(e.n, 0)::BIGINT AS shape_payload_entries
FROM session AS s
LEFT JOIN texts AS t
    ON t.rank = s.rank
LEFT JOIN entries AS e
    ON e.rank = s.rank
ORDER BY s.rank
