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
-- Why a kernel's times cannot be right (NULL when they can): such kernels are left out of
-- the kernels view, hence of every figure, and counted by the data_quality view.
CREATE OR REPLACE MACRO kernel_defect(start_ns, end_ns, capture_ns) AS CASE
    WHEN end_ns IS NULL OR start_ns IS NULL THEN 'null_time'
    WHEN end_ns < start_ns THEN 'end_before_start'
    WHEN end_ns - start_ns > capture_ns THEN 'longer_than_capture' END;
