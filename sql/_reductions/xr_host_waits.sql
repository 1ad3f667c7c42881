-- One row per asynchronous collective call of one report (a `coll:` range with its
-- completion mark, gloo or MPI) that the process waited for: the blocking OS runtime call
-- (pthread_cond_wait and timedwait, sem_wait and timedwait, futex) of the process that was
-- under way when the collective completed and returned first after it, within
-- HOST_WAKE_NS = 10 ms (a thread woken by the completion: DDP's wait for its gradient
-- buckets at the end of backward, a work.wait(); on a busy machine the woken thread can
-- take milliseconds to run: 2.7 ms seen on two loaded cores). The replay
-- (nsyswrap.crossrank.lanes) makes the rank wait there: it arrived when the call started
-- and went on when it returned. A call with no such wait was not waited for while it
-- ran. Needs the OS runtime traced (nsys --trace=osrt, launch's default). Times are
-- session ns.
-- @reads collectives, osrt_calls
-- @column pid BIGINT              Process.
-- @column pg VARCHAR              Process group id of the collective.
-- @column seq BIGINT              Its sequence number in the group.
-- @column done_ns BIGINT          Its completion mark (ns).
-- @column wait_start_ns BIGINT    Start of the blocking call that waited for it (ns).
-- @column wait_end_ns BIGINT      End of that call (ns).
WITH done AS (
    SELECT pid, pg, seq, done_ns
    FROM collectives
    WHERE done_ns IS NOT NULL
        AND pg IS NOT NULL
        AND seq IS NOT NULL
),
waits AS (
    SELECT pid, start_ns, end_ns
    FROM osrt_calls
    WHERE api LIKE 'pthread\_cond\_%wait' ESCAPE '\'
        OR api IN ('sem_wait', 'sem_timedwait', 'futex')
)
SELECT
    d.pid,
    d.pg,
    d.seq,
    d.done_ns,
    w.start_ns AS wait_start_ns,
    w.end_ns AS wait_end_ns
FROM done AS d
ASOF JOIN waits AS w
    ON w.pid = d.pid
    AND w.end_ns >= d.done_ns
WHERE w.start_ns <= d.done_ns
    AND w.end_ns - d.done_ns <= 10000000
