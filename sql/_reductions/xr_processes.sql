-- One row per process of one report with GPU work (kernels, copies, sets) and device
-- it ran on: how much it ran there. nsyswrap.crossrank.ranks makes each such process
-- (and each with collective calls) a rank when a report holds several, and labels a
-- device's rows with the rank of the process that ran the most there.
-- @reads kernels
-- @column pid BIGINT              Process id.
-- @column device BIGINT           Device it ran work on.
-- @column activities BIGINT       GPU activities it ran on the device.
SELECT
    pid,
    device,
    count(*) AS activities
FROM kernels
GROUP BY pid, device
ORDER BY pid, device
