-- One row per (rank, device, step) in the analysed window: the model FLOPs of a step,
-- the achieved TFLOP/s and the model FLOPs utilization (MFU) against the GPU's peak.
-- flops = flops_per_step, else 6 x model_params x tokens_per_step (the forward and
-- backward FLOPs of a dense transformer, 2 + 4 per parameter and token), both per GPU:
-- what one rank computes in one step. achieved = flops / step duration; MFU =
-- achieved / peak. The peak is peak_tflops when given, else the peak table's figure
-- for dtype (compute.peaks) of the GPU's exported name (devices.name; when the report
-- lists one GPU model only, that one). NULL figures: no FLOPs given, or no peak known.
-- Steps: those of the window (window_steps, as steps.ledger counts them).
-- @scope report
-- @include gpu_peaks
-- @reads window_steps, devices
-- @param flops_per_step DOUBLE = NULL  Model FLOPs one GPU computes per step.
-- @param model_params DOUBLE = NULL    Model parameters, for 6 x params x tokens.
-- @param tokens_per_step DOUBLE = NULL Tokens one GPU processes per step.
-- @param peak_tflops DOUBLE = NULL     Peak TFLOP/s of one GPU (overrides the table).
-- @param dtype VARCHAR = bf16          Data type of the peak: fp32, tf32, bf16, fp16, fp8.
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column step BIGINT                  Step number.
-- @column duration_ns BIGINT           Step range duration (ns).
-- @column gpu_name VARCHAR             GPU name as exported (NULL: not recorded).
-- @column peak_gpu VARCHAR             Row of the peak table it matched (NULL: none).
-- @column dtype VARCHAR                Data type of the peak.
-- @column peak_tflops DOUBLE           Peak used (TFLOP/s).
-- @column peak_source VARCHAR          --peak-tflops, or the datasheet of the table row.
-- @column flops DOUBLE                 Model FLOPs of the step on this GPU.
-- @column flops_source VARCHAR         --flops-per-step, or 6 x params x tokens.
-- @column achieved_tflops DOUBLE       flops / duration (TFLOP/s).
-- @column mfu DOUBLE                   achieved_tflops / peak_tflops (fraction).
-- @order rank, device, step
WITH steps AS (
    SELECT rank, device, step, end_ns - start_ns AS duration_ns
    FROM window_steps
),
only_model AS (
    -- the one GPU model a report lists, for devices its GPU table does not name
    SELECT rank, any_value(name) AS name
    FROM devices
    WHERE name IS NOT NULL
    GROUP BY rank
    HAVING count(DISTINCT name) = 1
),
gpus AS (
    SELECT d.rank, d.device, coalesce(d.name, o.name) AS gpu_name
    FROM (SELECT DISTINCT rank, device FROM steps) AS s
    JOIN devices AS d
        ON d.rank = s.rank
        AND d.device = s.device
    LEFT JOIN only_model AS o
        ON o.rank = d.rank
),
peaks AS (
    SELECT
        g.rank,
        g.device,
        g.gpu_name,
        p.gpu AS peak_gpu,
        CASE lower($dtype)
            WHEN 'fp32' THEN p.fp32 WHEN 'tf32' THEN p.tf32 WHEN 'bf16' THEN p.bf16
            WHEN 'fp16' THEN p.fp16 WHEN 'fp8' THEN p.fp8
        END::DOUBLE AS table_tflops,
        p.source
    FROM gpus AS g
    LEFT JOIN gpu_peaks() AS p
        ON regexp_matches(lower(g.gpu_name), p.pattern)
    QUALIFY row_number() OVER (PARTITION BY g.rank, g.device ORDER BY p.priority) = 1
),
given AS (
    SELECT
        coalesce($flops_per_step, 6 * $model_params * $tokens_per_step)::DOUBLE AS flops,
        CASE
            WHEN $flops_per_step IS NOT NULL THEN '--flops-per-step'
            WHEN $model_params IS NOT NULL AND $tokens_per_step IS NOT NULL
                THEN '6 x params x tokens'
        END AS flops_source
),
rows AS (
    SELECT
        s.rank,
        s.device,
        s.step,
        s.duration_ns,
        p.gpu_name,
        p.peak_gpu,
        lower($dtype) AS dtype,
        coalesce($peak_tflops, p.table_tflops)::DOUBLE AS peak_tflops,
        CASE
            WHEN $peak_tflops IS NOT NULL THEN '--peak-tflops'
            WHEN p.table_tflops IS NOT NULL THEN p.source
        END AS peak_source,
        g.flops,
        g.flops_source,
        g.flops / nullif(s.duration_ns, 0) / 1e3 AS achieved_tflops
    FROM steps AS s
    CROSS JOIN given AS g
    LEFT JOIN peaks AS p
        ON p.rank = s.rank
        AND p.device = s.device
)
SELECT *, achieved_tflops / nullif(peak_tflops, 0) AS mfu
FROM rows
ORDER BY rank, device, step
