-- One row per CUDA API call that launched GPU work (kernel, memcpy or memset),
-- joined to that work by process AND correlation id (ids repeat across processes).
-- Built from the already normalized api_calls and kernels of the same report.
-- When several calls share one correlation id (a runtime call and the driver call
-- it makes, or a repeated tracing layer), the runtime call, else the driver call wins.
-- @column pid BIGINT              Process id.
-- @column tid BIGINT              Thread that made the call.
-- @column api VARCHAR             API name, e.g. cudaLaunchKernel_v7000.
-- @column start_ns BIGINT         Call start, ns on the report's session clock.
-- @column end_ns BIGINT           Call end, ns.
-- @column dur_ns BIGINT           Call duration, ns.
-- @column correlation_id BIGINT   CUPTI correlation id.
-- @column device BIGINT           Device the work ran on.
-- @column stream BIGINT           Stream the work ran on.
-- @column kernel_start_ns BIGINT  Start of the launched work, ns.
-- @column kernel_end_ns BIGINT    End of the launched work, ns.
-- @column kind VARCHAR            Kind of the launched work (see kernels.kind).
-- @column latency_ns BIGINT       kernel_start_ns - start_ns: launch latency.
WITH ranked AS (
    SELECT
        pid,
        correlation_id,
        arg_min(
            {'tid': tid, 'api': api, 'start_ns': start_ns, 'end_ns': end_ns},
            (CASE api_class WHEN 'runtime' THEN 0 WHEN 'driver' THEN 1 ELSE 2 END, start_ns)
        ) AS call
    FROM api_calls
    WHERE (pid, correlation_id) IN (SELECT (pid, correlation_id) FROM kernels)
    GROUP BY pid, correlation_id
)
SELECT
    a.pid,
    a.call.tid AS tid,
    a.call.api AS api,
    a.call.start_ns AS start_ns,
    a.call.end_ns AS end_ns,
    a.call.end_ns - a.call.start_ns AS dur_ns,
    a.correlation_id,
    k.device,
    k.stream,
    k.start_ns AS kernel_start_ns,
    k.end_ns AS kernel_end_ns,
    k.kind,
    k.start_ns - a.call.start_ns AS latency_ns
FROM ranked AS a
JOIN kernels AS k
    ON k.pid = a.pid
    AND k.correlation_id = a.correlation_id
