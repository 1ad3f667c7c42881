-- One row per (rank, device) a rank ran GPU work on (kernels, copies, sets): the
-- physical GPU that device is, so that ranks sharing one GPU count it once (two ranks
-- on one GPU are 2 ranks on 1 GPU, and a figure per GPU is per physical GPU). A GPU is
-- known by its UUID (TARGET_INFO_GPU.uuid: the same in every report of the same GPU),
-- else by its PCI bus id on its host, else by its device id on its host (exports
-- without TARGET_INFO_GPU: nsys 2026.2, and files made without it); a report that
-- records no host name is a host of its own, so without a UUID two reports' devices
-- are never taken for one GPU unless both name the same host. Each process numbers
-- its devices itself: ranks of one host given one GPU each by CUDA_VISIBLE_DEVICES
-- may all use device id 0, and only the UUID or the bus id tells their GPUs apart
-- (identified_by says which was used).
-- @scope run
-- @reads xr_members, devices, session
-- @column rank INTEGER            The rank.
-- @column device BIGINT           Device id, as kernels.device.
-- @column gpu INTEGER             The physical GPU: numbered from 0 in the order of the
--                                 first (rank, device) that ran on it.
-- @column gpu_name VARCHAR        GPU name, if the report lists it.
-- @column identified_by VARCHAR   uuid, pci bus (on its host) or device id (on its host).
-- @column gpu_key VARCHAR         What identifies it: uuid <UUID>, host <name> pci <bus>
--                                 or host <name> device <id> (a report without host
--                                 name: report <path> in place of host <name>).
-- @column ranks_on_gpu BIGINT     Ranks that ran GPU work on this GPU.
-- @order rank, device
WITH used AS (
    SELECT DISTINCT m.rank, m.report_rank, m.device
    FROM xr_members AS m
    WHERE m.device IS NOT NULL
),
known AS (
    SELECT
        u.rank,
        u.device,
        d.name AS gpu_name,
        d.uuid,
        d.pci_bus,
        coalesce('host ' || s.host, 'report ' || s.report) AS place
    FROM used AS u
    JOIN session AS s
        ON s.rank = u.report_rank
    LEFT JOIN devices AS d
        ON d.rank = u.report_rank
        AND d.device = u.device
),
keyed AS (
    SELECT
        rank,
        device,
        gpu_name,
        CASE
            WHEN uuid IS NOT NULL THEN 'uuid'
            WHEN pci_bus IS NOT NULL THEN 'pci bus'
            ELSE 'device id'
        END AS identified_by,
        CASE
            WHEN uuid IS NOT NULL THEN 'uuid ' || uuid
            WHEN pci_bus IS NOT NULL THEN place || ' pci ' || pci_bus
            ELSE place || ' device ' || device
        END AS gpu_key
    FROM known
),
firsts AS (
    SELECT gpu_key, min((rank, device)) AS first_use, count(DISTINCT rank) AS ranks_on_gpu
    FROM keyed
    GROUP BY gpu_key
)
SELECT
    k.rank,
    k.device,
    (dense_rank() OVER (ORDER BY f.first_use) - 1)::INTEGER AS gpu,
    k.gpu_name,
    k.identified_by,
    k.gpu_key,
    f.ranks_on_gpu
FROM keyed AS k
JOIN firsts AS f
    ON f.gpu_key = k.gpu_key
ORDER BY k.rank, k.device
