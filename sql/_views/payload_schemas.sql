-- One row per entry of an NVTX payload schema of one report (NVTX_PAYLOAD_SCHEMAS and
-- @reads raw_payload_schemas, raw_payload_entries
-- NVTX_PAYLOAD_SCHEMA_ENTRIES, nsys 2026.2; an export repeats them per process).
-- @column domain_id BIGINT        NVTX domain id (per process) that registered the schema.
-- @column schema_id BIGINT        Schema id (NCCL: 2^24 + its static id).
-- @column payload_size BIGINT     Size of the payload struct (bytes).
-- @column idx BIGINT              Index of the entry in the schema.
-- @column type BIGINT             NVTX_PAYLOAD_ENTRY_TYPE_* or the id of a nested schema/enum.
-- @column name VARCHAR            Entry name, e.g. NCCL communicator ID.
-- @column offset_bytes BIGINT     Offset of the entry in the payload (NULL in the export = 0).
SELECT DISTINCT
    e.domainId AS domain_id,
    e.schemaId AS schema_id,
    s.payloadSize AS payload_size,
    e.idx,
    e.type,
    e.name,
    coalesce(e."offset", 0) AS offset_bytes
FROM raw_payload_entries AS e
LEFT JOIN (SELECT DISTINCT domainId, schemaId, payloadSize FROM raw_payload_schemas WHERE _proto = 0) AS s
    ON s.domainId = e.domainId
    AND s.schemaId = e.schemaId
WHERE e._proto = 0
