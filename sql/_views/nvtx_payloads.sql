-- One row per NVTX event of one report that carries an extended payload (its bytes in
-- @include _macros
-- @reads raw_nvtx_payload, raw_strings
-- NVTX_EVENTS.binaryData: nsys 2024.6.2 and later, only when exported with
-- `--include-blobs=true`; decoded by nsyswrap.crossrank.nccl_payload with the schemas of
-- the payload_schemas view). Empty for every default export.
-- @column pid BIGINT              Process id, decoded from globalTid.
-- @column tid BIGINT              Thread that opened the range.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns (NULL for marks and ranges left open).
-- @column text VARCHAR            Range message (registered strings resolved).
-- @column domain_id BIGINT        NVTX domain id (per process).
-- @column payload BLOB            The binaryData bytes: header, then the payload
--                                 (hex(payload) prints them).
SELECT
    pid_of(e.globalTid) AS pid,
    tid_of(e.globalTid) AS tid,
    e.start AS start_ns,
    e."end" AS end_ns,
    coalesce(e.text, s.value) AS text,
    e.domainId AS domain_id,
    e.binaryData AS payload
FROM raw_nvtx_payload AS e
LEFT JOIN (SELECT id, min(value) AS value FROM raw_strings WHERE _proto = 0 GROUP BY id) AS s
    ON s.id = e.textId
WHERE e._proto = 0
    AND e.eventType IN (34, 59, 60, 70, 71)
