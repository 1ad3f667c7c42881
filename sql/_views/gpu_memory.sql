-- One row per GPU memory allocation or release of one report
-- (CUDA_GPU_MEMORY_USAGE_EVENTS, recorded with nsys --cuda-memory-usage=true: every
-- cudaMalloc, cudaFree, cuMemAlloc, pool allocation, ... and module globals). Empty
-- otherwise. With PyTorch's caching allocator these are its segments (reserved
-- memory), not single tensors.
-- @include _macros
-- @reads raw_gpu_memory
-- @column pid BIGINT              Process id, decoded from globalPid.
-- @column device BIGINT           CUDA device id.
-- @column context BIGINT          CUDA context id.
-- @column start_ns BIGINT         When, ns on the report's session clock.
-- @column operation VARCHAR       alloc or free (ENUM_CUDA_DEV_MEM_EVENT_OPER).
-- @column bytes BIGINT            Bytes allocated or released.
-- @column mem_kind VARCHAR        Device, Device Static, Array, Managed, Pinned, Pageable
--                                 or Unknown (ENUM_CUDA_MEM_KIND).
-- @column address BIGINT          Virtual address of the block.
-- @column correlation_id BIGINT   Correlation id of the API call that made it.
-- @column stream BIGINT           Stream of a stream-ordered allocation, else NULL.
SELECT
    pid_of(globalPid) AS pid,
    deviceId AS device,
    contextId AS context,
    start AS start_ns,
    CASE memoryOperationType WHEN 0 THEN 'alloc' WHEN 1 THEN 'free' END AS operation,
    bytes,
    coalesce(mem_kind_name(memKind), 'Unknown') AS mem_kind,
    address,
    correlationId AS correlation_id,
    streamId AS stream
FROM raw_gpu_memory
WHERE _proto = 0
