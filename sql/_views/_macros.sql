-- Macros shared by the view builders: PID/TID decoding and enum labels.
-- pid_of / tid_of decode nsys "serialized global ids" (PID in bits 24..47,
-- TID in bits 0..23); the labels follow ENUM_CUDA_MEMCPY_OPER,
-- ENUM_CUDA_MEM_KIND and ENUM_CUPTI_SYNC_TYPE, which older exports lack.
CREATE OR REPLACE MACRO pid_of(g) AS (g >> 24) & 16777215;
CREATE OR REPLACE MACRO tid_of(g) AS g & 16777215;
CREATE OR REPLACE MACRO copy_kind_name(k) AS CASE k
    WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH' WHEN 3 THEN 'HtoA' WHEN 4 THEN 'AtoH'
    WHEN 5 THEN 'AtoA' WHEN 6 THEN 'AtoD' WHEN 7 THEN 'DtoA' WHEN 8 THEN 'DtoD'
    WHEN 9 THEN 'HtoH' WHEN 10 THEN 'PtoP' WHEN 11 THEN 'UVM HtoD'
    WHEN 12 THEN 'UVM DtoH' WHEN 13 THEN 'UVM DtoD' END;
CREATE OR REPLACE MACRO mem_kind_name(k) AS CASE k
    WHEN 0 THEN 'Pageable' WHEN 1 THEN 'Pinned' WHEN 2 THEN 'Device' WHEN 3 THEN 'Array'
    WHEN 4 THEN 'Managed' WHEN 5 THEN 'Device Static' WHEN 6 THEN 'Managed Static' END;
CREATE OR REPLACE MACRO sync_type_name(t) AS CASE t
    WHEN 1 THEN 'event_sync' WHEN 2 THEN 'stream_wait' WHEN 3 THEN 'stream_sync'
    WHEN 4 THEN 'context_sync' ELSE 'unknown' END;
-- Why an event's times cannot be right (NULL when they can): such events are left out of
-- their view, hence of every figure, and counted by the data_quality view. `not_integer`:
-- how many of its time and place columns held no whole number (read as NULL, see
-- sqlite_source); `capture_ns`: the capture's duration; `capture_end_ns`: capture_end.
-- Comparisons come first, so no subtraction overflows (CASE tries each WHEN only on the
-- rows the ones before did not take).
CREATE OR REPLACE MACRO event_defect(start_ns, end_ns, not_integer, capture_ns, capture_end_ns) AS CASE
    WHEN not_integer > 0 THEN 'not_integer'
    WHEN end_ns IS NULL OR start_ns IS NULL THEN 'null_time'
    WHEN end_ns < start_ns THEN 'end_before_start'
    WHEN start_ns < 0 THEN 'outside_capture'
    WHEN end_ns - start_ns > capture_ns THEN 'longer_than_capture'
    WHEN end_ns > capture_end_ns THEN 'outside_capture' END;
-- The end of the capture on the session clock (ns), from ANALYSIS_DETAILS: the later of its
-- duration and stop time (events are timed from the session start, 0); a report that
-- records neither: 30 days, longer than any capture.
CREATE OR REPLACE MACRO capture_end(duration_ns, stop_ns) AS
    coalesce(greatest(duration_ns, stop_ns), 2592000000000000);
