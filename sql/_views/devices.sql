-- One row per GPU of one report: every device that ran GPU work, plus the GPUs
-- @reads kernels, raw_gpus
-- listed in TARGET_INFO_GPU (a table that some exports lack).
-- @column device BIGINT              Device id as used by kernels.device.
-- @column name VARCHAR               GPU name, if listed.
-- @column sm_count BIGINT            Streaming multiprocessors, if listed.
-- @column total_memory_bytes BIGINT  Device memory, if listed.
WITH used AS (
    SELECT DISTINCT device FROM kernels
),
listed AS (
    SELECT id AS device, name, smCount AS sm_count, totalMemory AS total_memory_bytes
    FROM raw_gpus
    WHERE _proto = 0
)
SELECT
    coalesce(u.device, l.device) AS device,
    l.name,
    l.sm_count,
    l.total_memory_bytes
FROM used AS u
FULL OUTER JOIN listed AS l
    ON l.device = u.device
