-- One row per process of one report with GPU work (kernels, copies, sets): its lowest
-- device and how much it ran. nsyswrap.crossrank.ranks makes each such process (and
-- each with collective calls) a rank when a report holds several.
-- @reads kernels
-- @column pid BIGINT              Process id.
-- @column device BIGINT           Lowest device it ran work on.
-- @column activities BIGINT       GPU activities it ran.
SELECT
    pid,
    min(device) AS device,
    count(*) AS activities
FROM kernels
GROUP BY pid
