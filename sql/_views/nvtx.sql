-- One row per NVTX range or mark of one report, with its text and domain resolved.
-- @include _macros
-- @reads raw_nvtx, raw_strings, raw_analysis
-- Text comes from `text` or, for registered strings, StringIds via `textId`.
-- Domain names are per process (eventType 75 rows); domain 0 is 'default'.
-- Ranges left open at the end of the capture end at the report's last NVTX time. Events
-- whose times cannot be right (event_defect; a mark or an open range by its start) are left
-- out (and counted by data_quality).
-- @column pid BIGINT              Process id, decoded from globalTid.
-- @column tid BIGINT              Thread that opened the range.
-- @column end_tid BIGINT          Thread that closed a start/end range (else NULL).
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns (NULL for marks).
-- @column dur_ns BIGINT           end_ns - start_ns (NULL for marks).
-- @column event_type VARCHAR      push_pop, start_end or mark.
-- @column domain VARCHAR          NVTX domain name ('default' for domain 0).
-- @column text VARCHAR            Range message.
-- @column range_id BIGINT         Range id of start/end ranges.
-- @column color BIGINT            ARGB color, if given.
-- @column category BIGINT         Category id, if given.
-- @column int_value BIGINT        Integer payload, if given.
-- @column double_value DOUBLE     Floating-point payload, if given.
WITH events AS (
    SELECT e.*
    FROM raw_nvtx AS e
    CROSS JOIN (
        SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
        FROM raw_analysis WHERE _proto = 0
    ) AS c
    WHERE e._proto = 0
        AND (e.eventType NOT IN (34, 59, 60, 70, 71)  -- (domain names etc.: no event)
             OR event_defect(e.start, coalesce(e."end", e.start), e._not_integer, c.ns, c.end_ns) IS NULL)
),
domains AS (
    SELECT
        pid_of(globalTid) AS pid,
        domainId AS domain_id,
        any_value(text) AS name
    FROM events
    WHERE eventType = 75
    GROUP BY ALL
),
last_time AS (
    SELECT max(coalesce("end", start)) AS t FROM events
)
SELECT
    pid_of(e.globalTid) AS pid,
    tid_of(e.globalTid) AS tid,
    tid_of(e.endGlobalTid) AS end_tid,
    e.start AS start_ns,
    CASE WHEN e.eventType = 34 THEN NULL ELSE coalesce(e."end", l.t) END AS end_ns,
    CASE WHEN e.eventType = 34 THEN NULL ELSE coalesce(e."end", l.t) - e.start END AS dur_ns,
    CASE
        WHEN e.eventType IN (59, 70) THEN 'push_pop'
        WHEN e.eventType IN (60, 71) THEN 'start_end'
        ELSE 'mark'
    END AS event_type,
    CASE
        WHEN coalesce(e.domainId, 0) = 0 THEN 'default'
        ELSE coalesce(d.name, CASE WHEN s.value LIKE 'nccl%' THEN 'NCCL' END)
    END AS domain,
    coalesce(e.text, s.value) AS text,
    e.rangeId AS range_id,
    e.color,
    e.category,
    coalesce(e.int64Value, e.uint64Value, e.int32Value, e.uint32Value) AS int_value,
    coalesce(e.doubleValue, e.floatValue) AS double_value
FROM events AS e
CROSS JOIN last_time AS l
LEFT JOIN (SELECT id, min(value) AS value FROM raw_strings WHERE _proto = 0 GROUP BY id) AS s
    ON s.id = e.textId
LEFT JOIN domains AS d
    ON d.pid = pid_of(e.globalTid)
    AND d.domain_id = e.domainId
WHERE e.eventType IN (34, 59, 60, 70, 71)
