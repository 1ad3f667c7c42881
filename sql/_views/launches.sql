-- One row per CUDA API call that launched GPU work (kernel, memcpy or memset),
-- @reads api_calls, kernels
-- joined to that work by process AND correlation id (ids repeat across processes).
-- Built from the already normalized api_calls and kernels of the same report.
-- When several calls share one correlation id (a runtime call and the driver call
-- it makes, or a repeated tracing layer), the runtime call, else the driver call wins,
-- for each kernel it launched (a cudaGraphLaunch launches every kernel of its graph).
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
WITH joined AS (
    SELECT
        a.pid,
        a.tid,
        a.api,
        a.start_ns,
        a.end_ns,
        a.correlation_id,
        k.device,
        k.stream,
        k.start_ns AS kernel_start_ns,
        k.end_ns AS kernel_end_ns,
        k.kind,
        CASE a.api_class WHEN 'runtime' THEN 0 WHEN 'driver' THEN 1 ELSE 2 END
            AS preference
    FROM api_calls AS a
    JOIN kernels AS k
        ON k.pid = a.pid
        AND k.correlation_id = a.correlation_id
),
repeated AS (
    SELECT pid, correlation_id
    FROM api_calls
    GROUP BY ALL
    HAVING count(*) > 1
),
chosen AS (
    SELECT * FROM joined ANTI JOIN repeated USING (pid, correlation_id)
    UNION ALL
    SELECT * FROM (SELECT * FROM joined SEMI JOIN repeated USING (pid, correlation_id))
    QUALIFY row_number() OVER (
        PARTITION BY pid, correlation_id, device, stream, kernel_start_ns, kernel_end_ns
        ORDER BY preference, start_ns, api, tid
    ) = 1
)
SELECT
    pid,
    tid,
    api,
    start_ns,
    end_ns,
    end_ns - start_ns AS dur_ns,
    correlation_id,
    device,
    stream,
    kernel_start_ns,
    kernel_end_ns,
    kind,
    kernel_start_ns - start_ns AS latency_ns
FROM chosen
