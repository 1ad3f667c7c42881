-- One row per OS runtime library call of one report (OSRT_API, recorded with
-- nsys --trace=osrt): pthread, file, socket and memory calls such as
-- pthread_cond_wait, poll, read or ioctl. Empty when the OS runtime was not traced.
-- Only calls (event class 27, TRACE_PROCESS_EVENT_OS_RUNTIME), not the start and finish
-- markers of the tracing itself.
-- @include _macros
-- @reads raw_osrt, raw_strings
-- @column pid BIGINT              Process id, decoded from globalTid.
-- @column tid BIGINT              Thread that made the call.
-- @column api VARCHAR             Function name, e.g. pthread_cond_timedwait.
-- @column start_ns BIGINT         Call start, ns on the report's session clock.
-- @column end_ns BIGINT           Call end, ns.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column nesting_level BIGINT    0 for a call of the program, more for one made inside
--                                 another traced call.
SELECT
    pid_of(o.globalTid) AS pid,
    tid_of(o.globalTid) AS tid,
    s.value AS api,
    o.start AS start_ns,
    o."end" AS end_ns,
    o."end" - o.start AS dur_ns,
    o.nestingLevel AS nesting_level
FROM raw_osrt AS o
LEFT JOIN (SELECT id, value FROM raw_strings WHERE _proto = 0) AS s
    ON s.id = o.nameId
WHERE o._proto = 0
    AND o.eventClass = 27
