-- One row per process of one report with GPU work (kernels, copies, sets) and device
-- it ran on: how much it ran there. nsyswrap.crossrank.ranks makes each such process
-- (and each with collective calls) a rank when a report holds several, and labels a
-- device's rows with the rank of the process that ran the most there; the ends tell
-- how far the report's capture reached (nsyswrap.crossrank.solve.unrelated).
-- @reads kernels
-- @column pid BIGINT              Process id.
-- @column device BIGINT           Device it ran work on.
-- @column activities BIGINT       GPU activities it ran on the device.
-- @column last_end_ns BIGINT      End of the last of them, ns on the report's session clock.
SELECT
    pid,
    device,
    count(*) AS activities,
    max(end_ns) AS last_end_ns
FROM kernels
GROUP BY pid, device
ORDER BY pid, device
