-- One row per GPU of one report: every device that ran GPU work, plus the GPUs
-- @reads kernels, raw_gpus
-- listed in TARGET_INFO_GPU (a table that some exports lack: nsys 2026.2, and the
-- columns name to uuid are NULL then). A listed GPU is the device whose id is its
-- TARGET_INFO_GPU.id.
-- @column device BIGINT              Device id as used by kernels.device.
-- @column name VARCHAR               GPU name, if listed.
-- @column sm_count BIGINT            Streaming multiprocessors, if listed.
-- @column total_memory_bytes BIGINT  Device memory, if listed.
-- @column pci_bus VARCHAR            PCI bus id on its host (e.g. 0000:00:06.0), if listed.
-- @column uuid VARCHAR               The GPU's UUID, one per physical GPU, if listed.
WITH used AS (
    SELECT DISTINCT device FROM kernels
),
listed AS (
    SELECT
        id AS device,
        name,
        smCount AS sm_count,
        totalMemory AS total_memory_bytes,
        nullif(busLocation, '') AS pci_bus,
        nullif(uuid, '') AS uuid
    FROM raw_gpus
    WHERE _proto = 0
)
SELECT
    coalesce(u.device, l.device) AS device,
    l.name,
    l.sm_count,
    l.total_memory_bytes,
    l.pci_bus,
    l.uuid
FROM used AS u
FULL OUTER JOIN listed AS l
    ON l.device = u.device
