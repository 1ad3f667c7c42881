-- One row per named thread of one report: its process, thread id and the name the
-- program or the OS gave it (ThreadNames: e.g. `python`, `pt_autograd_0`,
-- `pt_nccl_watchdg`; nsys's own threads `[NSys]`). A thread without a row has no
-- recorded name. Where a thread has several names, the one of highest priority (then
-- the lowest name) is kept.
-- @include _macros
-- @reads raw_thread_names, raw_strings
-- @column pid BIGINT              Process id, decoded from globalTid.
-- @column tid BIGINT              Thread id, decoded from globalTid.
-- @column name VARCHAR            The thread's name.
WITH named AS (
    SELECT
        pid_of(t.globalTid) AS pid,
        tid_of(t.globalTid) AS tid,
        s.value AS name,
        t.priority
    FROM raw_thread_names AS t
    JOIN (SELECT id, min(value) AS value FROM raw_strings WHERE _proto = 0 GROUP BY id) AS s
        ON s.id = t.nameId
    WHERE t._proto = 0
        AND t.globalTid IS NOT NULL
)
SELECT pid, tid, arg_min(name, (-coalesce(priority, 0), name)) AS name
FROM named
GROUP BY pid, tid
