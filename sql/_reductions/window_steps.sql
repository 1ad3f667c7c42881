-- One row per step of a device in the analysed window: the step regions
-- (device_step_regions) that overlap the window and lie in [step_from, step_to), as
-- steps.ledger counts them; read by compute.mfu and memory.usage.
-- @reads device_step_regions, device_windows
-- @column device             BIGINT   CUDA device id.
-- @column step               BIGINT   Step number.
-- @column start_ns           BIGINT   Step start (session clock ns).
-- @column end_ns             BIGINT   Step end (ns).
-- @column region_end_ns      BIGINT   End of the time it holds: end_ns cut at the next step (ns).
SELECT r.rank, r.device, r.step, r.start_ns, r.end_ns, r.region_end_ns
FROM device_step_regions AS r
JOIN device_windows AS w
    ON w.rank = r.rank
    AND w.device = r.device
WHERE r.start_ns < w.window_end_ns
    AND r.end_ns > w.window_start_ns
    AND r.step >= coalesce($step_from, r.step)
    AND r.step < coalesce($step_to, r.step + 1)
