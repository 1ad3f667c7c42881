-- nsys 2026.2.1.210 SQLite export schema 3.25.0, copied from a real export.
-- Source: nsysai__mfu_2gpu_before.sqlite (see shared/nsys-sqlite/PROVENANCE.md).
-- Regenerate: python -m nsyswrap.synth.extract_schema REAL.sqlite

CREATE TABLE StringIds (
    -- Consolidation of repetitive string values.

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- ID reference value.
    value                       TEXT      NOT NULL                     -- String value.
);

CREATE TABLE ANALYSIS_FILE (
    -- Analysis file content

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- ID reference value.
    filename                    TEXT,                                  -- File path
    contentId                   INTEGER,                               -- REFERENCES StringIds(id) -- File content
    globalPid                   INTEGER   NOT NULL                     -- Serialized GlobalId.
);

CREATE TABLE ProcessStreams (
    globalPid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    filenameId                  INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- File name
    contentId                   INTEGER   NOT NULL                     -- REFERENCES StringIds(id) -- Stream content
);

CREATE TABLE NVTX_PAYLOAD_SCHEMAS (
    -- NVTX payload schema attributes.

    domainId                    INTEGER,                               -- User-controlled ID that can be used to group events.
    schemaId                    INTEGER,                               -- Identifier of the payload schema.
    name                        TEXT,                                  -- Schema name.
    type                        INTEGER,                               -- Schema type.
    flags                       INTEGER,                               -- Schema flags.
    numEntries                  INTEGER,                               -- Number of payload schema entries.
    payloadSize                 INTEGER,                               -- Size of the static payload.
    alignTo                     INTEGER                                -- Field alignment in bytes.
);

CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (
    -- NVTX payload schema entries.

    domainId                    INTEGER   NOT NULL,                    -- User-controlled ID that can be used to group events.
    schemaId                    INTEGER   NOT NULL,                    -- Identifier of the payload schema.
    idx                         INTEGER   NOT NULL,                    -- Index of the entry in the payload schema.
    flags                       INTEGER,                               -- Payload entry flags.
    type                        INTEGER,                               -- Payload entry type.
    name                        TEXT,                                  -- Label of the payload entry.
    description                 TEXT,                                  -- Description of the payload entry.
    arrayOrUnionDetail          INTEGER,                               -- Array length (index) or selected union member.
    offset                      INTEGER                                -- Entry offset in the binary data in bytes.
);

CREATE TABLE TARGET_INFO_SYSTEM_ENV (
    globalVid                   INTEGER,                               -- Serialized GlobalId.
    devStateName                TEXT      NOT NULL,                    -- Device state name.
    name                        TEXT      NOT NULL,                    -- Property name.
    nameEnum                    INTEGER   NOT NULL,                    -- Property enum value.
    value                       TEXT      NOT NULL                     -- Property value.
);
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuCores', 1, '18');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuSpeedMhz', 2, '4000');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuArchitecture', 3, 'x86_64');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportedABIs', 5, 'x86_64,');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'Supported64BitABIs', 7, 'x86_64');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuDescription', 13, 'unknown');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuInfo', 14, '{"items":[{"cpuid":0,"socket":0,"maxfreqhz":4000000000},{"cpuid":1,"socket":0,"maxfreqhz":4000000000},{"cpuid":2,"socket":0,"maxfreqhz":4000000000},{"cpuid":3,"socket":0,"maxfreqhz":4000000000},{"cpuid":4,"socket":0,"maxfreqhz":4000000000},{"cpuid":5,"socket":0,"maxfreqhz":4000000000},{"cpuid":6,"socket":0,"maxfreqhz":4000000000},{"cpuid":7,"socket":0,"maxfreqhz":4000000000},{"cpuid":8,"socket":0,"maxfreqhz":4000000000},{"cpuid":9,"socket":0,"maxfreqhz":4000000000},{"cpuid":10,"socket":0,"maxfreqhz":4000000000},{"cpuid":11,"socket":0,"maxfreqhz":4000000000},{"cpuid":12,"socket":0,"maxfreqhz":4000000000},{"cpuid":13,"socket":0,"maxfreqhz":4000000000},{"cpuid":14,"socket":0,"maxfreqhz":4000000000},{"cpuid":15,"socket":0,"maxfreqhz":4000000000},{"cpuid":16,"socket":0,"maxfreqhz":4000000000},{"cpuid":17,"socket":0,"maxfreqhz":4000000000}]}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CpuEmcSpeedMhz', 101, '1600');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsXmcClients', 153, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'TargetInstallDir', 170, '/opt/nvidia/nsight-systems-cli/2026.2.1/target-linux-x64');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasDiscreteGpu', 203, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'NvDriverVersion', 205, '580.95.05');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsX86BasedDevice', 506, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HardwarePlatform', 600, 'x86_64');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SoftwarePlatform', 601, 'L4X');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'OsDescription', 605, 'Ubuntu 22.04.5 LTS');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'CudaDriverVersion', 611, '13000');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SoftwareReleaseVersion', 618, '4.4.0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'Hostname', 619, 'modal');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsDevicePropsUpdated', 701, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsDeviceCapsUpdated', 702, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsPersistentDevice', 703, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsRootEnabled', 705, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'NamespacePID', 722, 'pid:[4]');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasThreadStateEvents', 800, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasNvtxEvents', 809, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasCudaEvents', 812, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasGraphicsEvents', 813, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasOSRuntimeEvents', 815, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasCuDNNEvents', 816, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasOpenACCEvents', 819, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasNvMediaEvents', 820, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasCudaBacktraceEvents', 821, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasVideoEvents', 822, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsDX11', 838, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsDX12', 839, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsGpuCtxsw', 840, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsPmuCounters', 842, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsCpuFrequency', 844, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsVulkan', 845, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsMPI', 846, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsCpuCtxsw', 848, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsGpuMetrics', 849, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasBacktraces', 851, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasBacktracingAlgorithms', 852, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsUMPageFaults', 854, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsSampling', 861, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsLinuxPerf', 862, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'KernelVersion', 882, '#1 SMP Sun Jan 10 15:06:54 PST 2016');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'EventLibSourcesInfo', 891, '{"BaseDir":"/sys/kernel/eventlib"}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsArchTimer', 892, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportedFTraceEvents', 894, '{}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'IsGameRecordingModeOn', 896, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'GpuInfo', 897, '{}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'HasOpenMPEvents', 899, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsSli', 900, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsLBR', 901, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsOpenSHMEM', 903, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'ExportLevel', 904, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsUCX', 906, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsIsr', 907, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsSocMetrics', 908, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'NicInfo', 910, '{}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'OfedDriverVersion', 911, '');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'LinuxPerfInfo', 912, '{"samplingPeriodInfo":{"minSamplingPeriod":125000},"CpuCoreInfo":{"MaximumSimultaneousEvents":0},"OsInfo":{}}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsPythonBacktraceSampling', 913, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsNicMetrics', 914, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsVulkanSC', 917, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsOpenXR', 918, '0');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsSyscallTrace', 920, '1');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SocInfo', 921, '');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'ArmCores', 923, '{}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'PluginsInfo', 924, '{"Plugins":[{"ExecutablePath":"network_plugin","FeatureName":"Collect network adapter metrics","Description":"Collects network adapter metrics from /sys/class/net/","ExtendedDescriptionForGui":"Options:\n  -i | --interval  Sampling interval in microseconds (default: 100000)\n  -d | --device    Device name as regular expression\n                   (default: all physical devices)\n  -m | --metric    Metric name as regular expression (default: .*_bytes)\n\nTo specify multiple devices and metrics the respective options can be used\nmultiple times and as regular expression.\nWhen using `-d all` or `--device=all` all adapters will be considered (not only\nphysical ones).\nWhen using `-m all` or `--metric=all` all metrics will be considered (not only\nmetrics in bytes).\n","IsInternalFeature":true},{"ExecutablePath":"storage_metrics","FeatureName":"Collect storage metrics","Description":"Collect traffic quantity, throughput and operation counters of mounted remote volumes.","IsInternalFeature":true},{"ExecutablePath":"nic_sampler","FeatureName":"efa_metrics","Description":"Collects AWS EFA Infiniband and Ethernet metrics","IsInternalFeature":false},{"ExecutablePath":"nvml_plugin","FeatureName":"Collect NVML metrics","Description":"Collects power and temperature metrics using the NVIDIA Management Library (NVML)\n API","ExtendedDescriptionForGui":"Options:\n  -i | --interval  Sampling interval in milliseconds (default: 100)\n  -g | --gpu-devices  GPUs to be sampled. Available options are: all, cuda-visible, or a comma-separated\n                      list of GPU IDs (e.g., 0,1,3) (default: cuda-visible)\n\nThe power usage is collected in Watts using the `nvmlDeviceGetFieldValues` API\nfunction.\nThe GPU temperature is collected in degrees Celsius with the\n`nvmlDeviceGetTemperature` API function.\n","IsInternalFeature":true}]}');
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local (CLI)', 'SupportsNCCL', 925, '1');

CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs                  INTEGER,                               -- UTC Epoch timestamp at start of the capture (ns).
    utcTime                     TEXT,                                  -- Start of the capture in UTC.
    localTime                   TEXT,                                  -- Start of the capture in local time of target.
    systemClockNs               INTEGER                                -- Target system clock timestamp at start of the capture (ns).
);

CREATE TABLE ANALYSIS_DETAILS (
    -- Details about the analysis session.

    globalVid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    duration                    INTEGER   NOT NULL,                    -- The total time span of the entire trace (ns).
    startTime                   INTEGER   NOT NULL,                    -- Trace start timestamp in nanoseconds.
    stopTime                    INTEGER   NOT NULL                     -- Trace stop timestamp in nanoseconds.
);

CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (
    timestamp                   INTEGER,                               -- The device-side CUDA Event completion timestamp. 0 if not collected.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- Correlation ID of the event record API to which this result is associated.
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    eventId                     INTEGER   NOT NULL,                    -- Event ID for which the event record API is called.
    eventSyncId                 INTEGER                                -- CUDA Event Sync ID to link event record API to related synchronization APIs.
);

CREATE TABLE DIAGNOSTIC_EVENT (
    timestamp                   INTEGER   NOT NULL,                    -- Event timestamp (ns).
    timestampType               INTEGER   NOT NULL,                    -- REFERENCES ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE(id)
    source                      INTEGER   NOT NULL,                    -- REFERENCES ENUM_DIAGNOSTIC_SOURCE_TYPE(id)
    severity                    INTEGER   NOT NULL,                    -- REFERENCES ENUM_DIAGNOSTIC_SEVERITY_LEVEL(id)
    text                        TEXT      NOT NULL,                    -- Diagnostic message text
    globalPid                   INTEGER                                -- Serialized GlobalId.
);

CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- Correlation ID of the synchronization API to which this result is associated.
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    deprecatedSyncType          INTEGER,                               -- Deprecated, use syncType instead. For older report, REFERENCES ENUM_CUPTI_SYNC_TYPE(id)
    syncType                    INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUPTI_SYNC_TYPE(id)
    eventId                     INTEGER   NOT NULL,                    -- Event ID for which the synchronization API is called.
    eventSyncId                 INTEGER                                -- CUDA Event Sync ID to link the synchronization API to associated event record API.
);

CREATE TABLE PROFILER_OVERHEAD (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Function name
    overheadType                INTEGER   NOT NULL                     -- REFERENCES ENUM_CUPTI_OVERHEAD_TYPE(id)
);

CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    eventClass                  INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_CLASS(id)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    correlationId               INTEGER,                               -- ID used to identify events that this function call has triggered.
    nameId                      INTEGER,                               -- REFERENCES StringIds(id) -- Function name
    overheadType                INTEGER   NOT NULL                     -- REFERENCES ENUM_CUPTI_OVERHEAD_TYPE(id)
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    value                       INTEGER   NOT NULL,                    -- Value assigned to memory.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes set (B).
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    memKind                     INTEGER                                -- REFERENCES ENUM_CUDA_MEM_KIND(id)
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes transferred (B).
    copyKind                    INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_MEMCPY_OPER(id)
    deprecatedSrcId             INTEGER,                               -- Deprecated, use srcDeviceId instead.
    srcKind                     INTEGER,                               -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    dstKind                     INTEGER,                               -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    srcDeviceId                 INTEGER,                               -- Source device ID.
    srcContextId                INTEGER,                               -- Source context ID.
    dstDeviceId                 INTEGER,                               -- Destination device ID.
    dstContextId                INTEGER,                               -- Destination context ID.
    migrationCause              INTEGER,                               -- REFERENCES ENUM_CUDA_UNIF_MEM_MIGRATION(id)
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    virtualAddress              INTEGER,                               -- Virtual base address of the page/s being transferred.
    copyCount                   INTEGER                                -- The total number of memcopy operations traced in this record. In CUDA MemcpyBatchAsync APIs, multiple memcpy operations may be batched together for optimization purposes based on certain heuristics.
);

CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    demangledName               INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Kernel function name w/ templates
    shortName                   INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Base kernel function name
    mangledName                 INTEGER,                               -- REFERENCES StringIds(id) -- Raw C++ mangled kernel function name
    launchType                  INTEGER,                               -- REFERENCES ENUM_CUDA_KERNEL_LAUNCH_TYPE(id)
    cacheConfig                 INTEGER,                               -- REFERENCES ENUM_CUDA_FUNC_CACHE_CONFIG(id)
    registersPerThread          INTEGER   NOT NULL,                    -- Number of registers required for each thread executing the kernel.
    gridX                       INTEGER   NOT NULL,                    -- X-dimension grid size.
    gridY                       INTEGER   NOT NULL,                    -- Y-dimension grid size.
    gridZ                       INTEGER   NOT NULL,                    -- Z-dimension grid size.
    blockX                      INTEGER   NOT NULL,                    -- X-dimension block size.
    blockY                      INTEGER   NOT NULL,                    -- Y-dimension block size.
    blockZ                      INTEGER   NOT NULL,                    -- Z-dimension block size.
    staticSharedMemory          INTEGER   NOT NULL,                    -- Static shared memory allocated for the kernel (B).
    dynamicSharedMemory         INTEGER   NOT NULL,                    -- Dynamic shared memory reserved for the kernel (B).
    localMemoryPerThread        INTEGER   NOT NULL,                    -- Amount of local memory reserved for each thread (B).
    localMemoryTotal            INTEGER   NOT NULL,                    -- Total amount of local memory reserved for the kernel (B).
    gridId                      INTEGER   NOT NULL,                    -- Unique grid ID of the kernel assigned at runtime.
    sharedMemoryExecuted        INTEGER,                               -- Shared memory size set by the driver.
    graphNodeId                 INTEGER,                               -- REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)
    sharedMemoryLimitConfig     INTEGER,                               -- REFERENCES ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG(id)
    qmdBulkReleaseDone          INTEGER,                               -- QMD bulk release done timestamp from CWD events.
    qmdPreexitDone              INTEGER,                               -- QMD pre-exit done timestamp from CWD events.
    qmdLastCtaDone              INTEGER,                               -- QMD last CTA done timestamp from CWD events.
    graphId                     INTEGER,                               -- Kernel graph ID.
    clusterX                    INTEGER,                               -- Cluster X dimension.
    clusterY                    INTEGER,                               -- Cluster Y dimension.
    clusterZ                    INTEGER,                               -- Cluster Z dimension.
    clusterSchedulingPolicy     INTEGER,                               -- Cluster scheduling policy.
    maxPotentialClusterSize     INTEGER,                               -- Maximum potential cluster size.
    maxActiveClusters           INTEGER,                               -- Maximum active clusters.
    sharedMemoryRequestedPercentage   INTEGER,                         -- Shared memory requested percentage.
    tensorSizeMinusOneElements   TEXT      NOT NULL                    -- TMA descriptor tensor size minus one elements array.
);

CREATE TABLE PROCESSES (
    -- Names and identifiers of processes captured in the report.

    globalPid                   INTEGER,                               -- Serialized GlobalId.
    pid                         INTEGER,                               -- The process ID.
    name                        TEXT                                   -- The process name.
);

CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    eventClass                  INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_CLASS(id)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    correlationId               INTEGER,                               -- ID used to identify events that this function call has triggered.
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Function name
    returnValue                 INTEGER   NOT NULL,                    -- Return value of the function call.
    callchainId                 INTEGER                                -- REFERENCES CUDA_CALLCHAINS(id)
);

CREATE TABLE NVTX_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER,                               -- Event end timestamp (ns).
    eventType                   INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_TYPE(id)
    rangeId                     INTEGER,                               -- Correlation ID returned from a nvtxRangeStart call.
    category                    INTEGER,                               -- User-controlled ID that can be used to group events.
    color                       INTEGER,                               -- Encoded ARGB color value.
    text                        TEXT,                                  -- Explicit name/text (non-registered string)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    endGlobalTid                INTEGER,                               -- Serialized GlobalId.
    textId                      INTEGER,                               -- REFERENCES StringIds(id) -- Registered NVTX domain/string
    domainId                    INTEGER,                               -- User-controlled ID that can be used to group events.
    uint64Value                 INTEGER,                               -- One of possible payload value union members.
    int64Value                  INTEGER,                               -- One of possible payload value union members.
    doubleValue                 REAL,                                  -- One of possible payload value union members.
    uint32Value                 INTEGER,                               -- One of possible payload value union members.
    int32Value                  INTEGER,                               -- One of possible payload value union members.
    floatValue                  REAL,                                  -- One of possible payload value union members.
    jsonTextId                  INTEGER,                               -- One of possible payload value union members.
    jsonText                    TEXT,                                  -- One of possible payload value union members.
    binaryData                  TEXT                                   -- Binary payload. See docs for format.
);

CREATE TABLE ThreadNames (
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Thread name
    priority                    INTEGER,                               -- Priority of the thread.
    globalTid                   INTEGER                                -- Serialized GlobalId.
);

CREATE TABLE TARGET_INFO_CUDA_STREAM (
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    hwId                        INTEGER   NOT NULL,                    -- Hardware ID.
    vmId                        INTEGER   NOT NULL,                    -- VM ID.
    processId                   INTEGER   NOT NULL,                    -- Process ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    priority                    INTEGER   NOT NULL,                    -- Priority of the stream.
    flag                        INTEGER   NOT NULL                     -- REFERENCES ENUM_CUPTI_STREAM_TYPE(id)
);

CREATE TABLE ENUM_NSYS_EVENT_TYPE (
    -- Nsys event type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (0, 'Unknown', 'Unknown');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (1, 'CpuCycles', 'CpuCycles');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (2, 'Instructions', 'Instructions');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (3, 'CacheReferences', 'CacheReferences');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (4, 'L1CacheDataWriteMisses', 'L1CacheDataWriteMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (5, 'L1CacheDataReadMisses', 'L1CacheDataReadMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (6, 'L1CacheInstructionMisses', 'L1CacheInstructionMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (7, 'L2CacheDataWriteMisses', 'L2CacheDataWriteMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (8, 'L2CacheDataReadMisses', 'L2CacheDataReadMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (9, 'L2CacheInstructionMisses', 'L2CacheInstructionMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (10, 'BranchInstructions', 'BranchInstructions');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (11, 'BranchMisses', 'BranchMisses');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (12, 'BusCycles', 'BusCycles');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (13, 'CpuClock', 'CpuClock');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (14, 'TaskClock', 'TaskClock');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (15, 'PageFault', 'PageFault');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (16, 'ContextSwitches', 'ContextSwitches');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (17, 'CpuMigrations', 'CpuMigrations');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (18, 'PageFaultsMin', 'PageFaultsMin');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (19, 'PageFaultsMax', 'PageFaultsMax');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (20, 'AlignmentFaults', 'AlignmentFaults');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (21, 'EmulationFaults', 'EmulationFaults');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (22, 'ThreadState', 'ThreadState');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (23, 'Frames', 'Frames');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (24, 'Annotations', 'Annotations');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (25, 'SchedSwitch', 'SchedSwitch');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (26, 'SchedWakeup', 'SchedWakeup');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (27, 'Command', 'Command');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (28, 'Mmap', 'Mmap');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (29, 'MemUsage', 'MemUsage');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (30, 'Emc', 'Emc');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (31, 'Composite', 'Composite');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (32, 'NvtxEvents', 'NvtxEvents');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (33, 'NvtxCategory', 'NvtxCategory');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34, 'NvtxMark', 'NvtxMark');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (35, 'NvtxPushRange', 'NvtxPushRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (36, 'NvtxPopRange', 'NvtxPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (37, 'NvtxStartRange', 'NvtxStartRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (38, 'NvtxEndRange', 'NvtxEndRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (39, 'NvtxThread', 'NvtxThread');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (40, 'PowerRate', 'PowerRate');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (41, 'Sched', 'Sched');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (42, 'CpuCyclesSelf', 'CpuCyclesSelf');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (43, 'CpuCyclesTotal', 'CpuCyclesTotal');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (44, 'CpuCyclesSelfPlus', 'CpuCyclesSelfPlus');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (45, 'Cuda', 'Cuda');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (46, 'CudaDevice', 'CudaDevice');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (47, 'TraceProcess', 'TraceProcess');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (48, 'TraceFunctions', 'TraceFunctions');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (49, 'Diagnostic', 'Diagnostic');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (50, 'GlWorkload', 'GlWorkload');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (51, 'BandwidthUsage', 'BandwidthUsage');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (52, 'KhrDebugMark', 'KhrDebugMark');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (53, 'KhrDebugPushRange', 'KhrDebugPushRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (54, 'KhrDebugPopRange', 'KhrDebugPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (55, 'KhrDebugGpuMark', 'KhrDebugGpuMark');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (56, 'KhrDebugGpuPushRange', 'KhrDebugGpuPushRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (57, 'KhrDebugGpuPopRange', 'KhrDebugGpuPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (58, 'GpuCtxsw', 'GpuCtxsw');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (59, 'NvtxPushPopRange', 'NvtxPushPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (60, 'NvtxStartEndRange', 'NvtxStartEndRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (61, 'ProfTime', 'ProfTime');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (62, 'KhrDebugPushPopRange', 'KhrDebugPushPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (63, 'KhrDebugGpuPushPopRange', 'KhrDebugGpuPushPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (64, 'NvtxtCategory', 'NvtxtCategory');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (65, 'NvtxtMark', 'NvtxtMark');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (66, 'NvtxtPushRange', 'NvtxtPushRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (67, 'NvtxtPopRange', 'NvtxtPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (68, 'NvtxtStartRange', 'NvtxtStartRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (69, 'NvtxtEndRange', 'NvtxtEndRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (70, 'NvtxtPushPopRange', 'NvtxtPushPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (71, 'NvtxtStartEndRange', 'NvtxtStartEndRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (72, 'NvtxtMetaThread', 'NvtxtMetaThread');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (73, 'NvtxtMetaProcess', 'NvtxtMetaProcess');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (74, 'NvtxtMetaFileDisplay', 'NvtxtMetaFileDisplay');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (75, 'NvtxDomainCreate', 'NvtxDomainCreate');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (76, 'NvtxDomainDestroy', 'NvtxDomainDestroy');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (77, 'NvnGpuCmdBuf', 'NvnGpuCmdBuf');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (78, 'TraceVSync', 'TraceVSync');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (79, 'CudaDeviceKernel', 'CudaDeviceKernel');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (80, 'CudaDeviceMemory', 'CudaDeviceMemory');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (81, 'Pmu', 'Pmu');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (82, 'NvnGpuDraw', 'NvnGpuDraw');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (83, 'NvnGpuCompute', 'NvnGpuCompute');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (84, 'NvnGpuDebug', 'NvnGpuDebug');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (85, 'OS runtime libraries', 'OS runtime libraries');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (86, 'CuDNN', 'CuDNN');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (87, 'CuBLAS', 'CuBLAS');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (88, 'NvMedia', 'NvMedia');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (89, 'OpenACC', 'OpenACC');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (90, 'Correlation', 'Correlation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (91, 'DX12', 'DX12');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (92, 'DX12Workload', 'DX12Workload');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (93, 'PmuRawEvent', 'PmuRawEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (94, 'GraphicsFrame', 'GraphicsFrame');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (95, 'Vulkan', 'Vulkan');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (96, 'VulkanWorkload', 'VulkanWorkload');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (97, 'NvtxNameCudaDevice', 'NvtxNameCudaDevice');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (98, 'NvtxNameCudaContext', 'NvtxNameCudaContext');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (99, 'NvtxNameCudaStream', 'NvtxNameCudaStream');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (100, 'SystemEvent', 'SystemEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (101, 'GpuMemoryEvent', 'GpuMemoryEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (102, 'DX12CreateObject', 'DX12CreateObject');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (103, 'VulkanCreateObject', 'VulkanCreateObject');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (104, 'UnitTraceEvent', 'UnitTraceEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (105, 'CustomETWEvent', 'CustomETWEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (106, 'CudaSyncEvent', 'CudaSyncEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (107, 'SLIEvent (DEPRECATED)', 'SLIEvent (DEPRECATED)');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (108, 'CudaBacktrace', 'CudaBacktrace');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (109, 'WddmEvent', 'WddmEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (110, 'DX11', 'DX11');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (111, 'DX11CreateObject', 'DX11CreateObject');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (112, 'DXGI', 'DXGI');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (113, 'CudaGraphNodeCreation', 'CudaGraphNodeCreation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (114, 'OpenMP', 'OpenMP');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (115, 'UncorePmuEvent', 'UncorePmuEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (116, 'UncorePmuCarmel', 'UncorePmuCarmel');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (117, 'CudaDeviceMemoryUsage', 'CudaDeviceMemoryUsage');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (118, 'ETWDxgKrnlEvent', 'ETWDxgKrnlEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (119, 'CudaUvmCpuPageFaultEvent', 'CudaUvmCpuPageFaultEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (120, 'CudaUvmGpuPageFaultEvent', 'CudaUvmGpuPageFaultEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (121, 'NICMetricsValuesEvent', 'NICMetricsValuesEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (122, 'NICMetricsListEvent', 'NICMetricsListEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (123, 'InterruptHandler', 'InterruptHandler');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (124, 'NvEncode', 'NvEncode');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (125, 'NVDecode', 'NVDecode');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (126, 'nvJPEG', 'nvJPEG');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (127, 'CudaEventRecord', 'CudaEventRecord');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (128, 'PerfEventCountEvent', 'PerfEventCountEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (129, 'CudaDeviceMemoryPool', 'CudaDeviceMemoryPool');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (130, 'CudaDeviceGraph', 'CudaDeviceGraph');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (131, 'CudaGraphExecCreation', 'CudaGraphExecCreation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (132, 'CudaGraphCreation', 'CudaGraphCreation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (133, 'CudaGraphClone', 'CudaGraphClone');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (134, 'GpuMemoryTransferEvent', 'GpuMemoryTransferEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (135, 'GlTrace', 'GlTrace');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (136, 'GpuVideoEngineWorkload', 'GpuVideoEngineWorkload');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (137, 'IBSwitchMetricsValuesEvent', 'IBSwitchMetricsValuesEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (138, 'GenericEvent', 'GenericEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (139, 'UncorePmuT23xScf', 'UncorePmuT23xScf');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (140, 'UncorePmuT23xDsu', 'UncorePmuT23xDsu');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (141, 'IBSwitchCongestionEvent', 'IBSwitchCongestionEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (142, 'CudaDeviceMemcpy', 'CudaDeviceMemcpy');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (143, 'PerfMetricValueEvent', 'PerfMetricValueEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (144, 'OpenXREvent', 'OpenXREvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (145, 'TegraInternalEvent', 'TegraInternalEvent');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (146, 'TraceStartFinish', 'TraceStartFinish');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (147, 'Syscall', 'Syscall');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (148, 'CudaConfidentialComputeKeyRotation', 'CudaConfidentialComputeKeyRotation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (149, 'CudaGraphExecNodeSetParams', 'CudaGraphExecNodeSetParams');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (150, 'NvApi', 'NvApi');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (151, 'CudaHostFunc', 'CudaHostFunc');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (152, 'CudaApi', 'CudaApi');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (153, 'Overhead', 'Overhead');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (154, 'CudaOverhead', 'CudaOverhead');

CREATE TABLE ENUM_NSYS_EVENT_CLASS (
    -- Nsys event class labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', 'CUDA runtime');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (1, 'TRACE_PROCESS_EVENT_CUDA_DRIVER', 'CUDA driver');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (2, 'TRACE_PROCESS_EVENT_GL', 'GL');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (3, 'TRACE_PROCESS_EVENT_TSP_OVERHEAD', 'TSP overhead');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (4, 'TRACE_PROCESS_EVENT_GL_DEBUG', 'GL debug');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (5, 'TRACE_PROCESS_EVENT_GL_WORKLOAD', 'GL workload');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (6, 'TRACE_PROCESS_EVENT_NVTX_START', 'NVTX start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (7, 'TRACE_PROCESS_EVENT_NVTX_FINISH', 'NVTX finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (8, 'TRACE_PROCESS_EVENT_GL_START', 'GL start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (9, 'TRACE_PROCESS_EVENT_GL_FINISH', 'GL finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (10, 'TRACE_PROCESS_EVENT_CUDA_START', 'CUDA start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (11, 'TRACE_PROCESS_EVENT_CUDA_FINISH', 'CUDA finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (12, 'TRACE_PROCESS_EVENT_CUDA_INIT_ERROR', 'CUDA init error');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (13, 'TRACE_PROCESS_EVENT_CUDA_EGL_DRIVER', 'CUDA EGL driver');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (18, 'TRACE_PROCESS_EVENT_VSYNC', 'Vsync');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (26, 'TRACE_PROCESS_EVENT_CUDA_API', 'CUDA API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (27, 'TRACE_PROCESS_EVENT_OS_RUNTIME', 'OSRT runtime');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (28, 'TRACE_PROCESS_EVENT_CUDNN', 'cuDNN');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (29, 'TRACE_PROCESS_EVENT_CUBLAS', 'cuBLAS');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (31, 'TRACE_PROCESS_EVENT_OS_RUNTIME_START', 'OSRT start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (32, 'TRACE_PROCESS_EVENT_OS_RUNTIME_FINISH', 'OSRT finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (33, 'TRACE_PROCESS_EVENT_CUDNN_START', 'cuDNN start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (34, 'TRACE_PROCESS_EVENT_CUDNN_FINISH', 'cuDNN finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (35, 'TRACE_PROCESS_EVENT_CUBLAS_START', 'cuBLAS start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (36, 'TRACE_PROCESS_EVENT_CUBLAS_FINISH', 'cuBLAS finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (37, 'TRACE_PROCESS_EVENT_THREAD_BLOCK', 'Thread block');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (38, 'TRACE_PROCESS_EVENT_NVMEDIA', 'NVmedia');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (39, 'TRACE_PROCESS_EVENT_NVMEDIA_START', 'NVmedia start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (40, 'TRACE_PROCESS_EVENT_NVMEDIA_FINISH', 'NVmedia finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (41, 'TRACE_PROCESS_EVENT_DX12_API', 'DX12 API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (42, 'TRACE_PROCESS_EVENT_DX12_WORKLOAD', 'DX12 workload');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (43, 'TRACE_PROCESS_EVENT_DX12_START', 'DX12 start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (44, 'TRACE_PROCESS_EVENT_DX12_FINISH', 'DX12 finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (45, 'TRACE_PROCESS_EVENT_OPENACC_START', 'OpenACC start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (46, 'TRACE_PROCESS_EVENT_OPENACC_FINISH', 'OpenACC finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (47, 'TRACE_PROCESS_EVENT_OPENACC_INIT_ERROR', 'OpenACC init error');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (48, 'TRACE_PROCESS_EVENT_OPENACC', 'OpenACC');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (49, 'TRACE_PROCESS_EVENT_CPU_FPS', 'CPU FPS');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (50, 'TRACE_PROCESS_EVENT_GPU_FPS', 'GPU FPS');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (51, 'TRACE_PROCESS_EVENT_GL_MULTI_ERROR', 'GL multi-error');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (52, 'TRACE_PROCESS_EVENT_DX12_DISPLAY', 'DX12 display');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (53, 'TRACE_PROCESS_EVENT_VULKAN_API', 'Vulkan API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (54, 'TRACE_PROCESS_EVENT_VULKAN_WORKLOAD', 'Vulkan workload');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (55, 'TRACE_PROCESS_EVENT_VULKAN_START', 'Vulkan start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (56, 'TRACE_PROCESS_EVENT_VULKAN_FINISH', 'Vulkan finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (57, 'TRACE_PROCESS_EVENT_SYSTEM_EVENT', 'System event');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (58, 'TRACE_PROCESS_EVENT_GPU_MEMORY', 'GPU memory');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (59, 'TRACE_PROCESS_EVENT_DX12_CREATE_OBJECT', 'DX12 create object');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (60, 'TRACE_PROCESS_EVENT_VULKAN_CREATE_OBJECT', 'Vulkan create object');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (61, 'TRACE_PROCESS_EVENT_CUSTOM_ETW_TRACE', 'Custom ETW trace');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (62, 'TRACE_PROCESS_EVENT_SLI_DEPRECATED', 'SLI (Deprecated)');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (63, 'TRACE_PROCESS_EVENT_SLI_START_DEPRECATED', 'SLI start (Deprecated)');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (64, 'TRACE_PROCESS_EVENT_SLI_FINISH_DEPRECATED', 'SLI finish (Deprecated)');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (65, 'TRACE_PROCESS_EVENT_DX12_DEBUG_API', 'DX12 debug API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (66, 'TRACE_PROCESS_EVENT_VULKAN_DEBUG_API', 'Vulkan debug API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (67, 'TRACE_PROCESS_EVENT_CUDABACKTRACE', 'CUDA backtrace');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (68, 'TRACE_PROCESS_EVENT_CUDABACKTRACE_START', 'CUDA backtrace start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (69, 'TRACE_PROCESS_EVENT_CUDABACKTRACE_FINISH', 'CUDA backtrace finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (70, 'TRACE_PROCESS_EVENT_WDDM', 'WDDM');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (71, 'TRACE_PROCESS_EVENT_DX11_API', 'DX11 API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (72, 'TRACE_PROCESS_EVENT_DX11_START', 'DX11 start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (73, 'TRACE_PROCESS_EVENT_DX11_FINISH', 'DX11 finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (74, 'TRACE_PROCESS_EVENT_DX11_CREATE_OBJECT', 'DX11 create object');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (75, 'TRACE_PROCESS_EVENT_DX11_DEBUG_API', 'DX11 debug API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (76, 'TRACE_PROCESS_EVENT_DXCOMMON_API', 'DX common API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (77, 'TRACE_PROCESS_EVENT_CUDA_GRAPH_NODE_CREATION', 'CUDA graph node creation');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (78, 'TRACE_PROCESS_EVENT_OPENMP', 'OpenMP');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (79, 'TRACE_PROCESS_EVENT_OPENMP_START', 'OpenMP start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (80, 'TRACE_PROCESS_EVENT_OPENMP_FINISH', 'OpenMP finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (81, 'TRACE_PROCESS_EVENT_NVAPI', 'NV API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (82, 'TRACE_PROCESS_EVENT_ETWDXGKRNL', 'ETW DXG KRNL');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (83, 'TRACE_PROCESS_EVENT_NVENCODE', 'NVENCODE');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (84, 'TRACE_PROCESS_EVENT_NVENCODE_START', 'NVENCODE start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (85, 'TRACE_PROCESS_EVENT_NVENCODE_FINISH', 'NVENCODE finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (86, 'TRACE_PROCESS_EVENT_NVDECODE', 'NVDECODE');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (87, 'TRACE_PROCESS_EVENT_NVDECODE_START', 'NVDECODE start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (88, 'TRACE_PROCESS_EVENT_NVDECODE_FINISH', 'NVDECODE finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (89, 'TRACE_PROCESS_EVENT_NVJPEG', 'nvJPEG');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (90, 'TRACE_PROCESS_EVENT_NVJPEG_START', 'nvJPEG start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (91, 'TRACE_PROCESS_EVENT_NVJPEG_FINISH', 'nvJPEG finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (92, 'TRACE_PROCESS_EVENT_DX12_BATCH_WORKLOAD', 'DX12 batch workload');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (93, 'TRACE_PROCESS_EVENT_VULKAN_BATCH_WORKLOAD', 'Vulkan batch workload');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (94, 'TRACE_PROCESS_EVENT_CUDA_GRAPHEXEC_CREATION', 'CUDA graph exec creation');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (95, 'TRACE_PROCESS_EVENT_CUDA_GRAPH_CREATION', 'CUDA graph creation');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (96, 'TRACE_PROCESS_EVENT_CUDA_GRAPH_CLONE', 'CUDA graph clone');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (98, 'TRACE_PROCESS_EVENT_OPENCL', 'OpenCL event');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (99, 'TRACE_PROCESS_EVENT_OPENCL_START', 'OpenCL start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (100, 'TRACE_PROCESS_EVENT_OPENCL_FINISH', 'OpenCL finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (101, 'TRACE_PROCESS_EVENT_OPENCL_INIT_ERROR', 'OpenCL Init error');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (102, 'TRACE_PROCESS_EVENT_CUDA_JIT', 'CUDA JIT');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (103, 'TRACE_PROCESS_EVENT_CUDA_OVERHEAD', 'CUDA overhead');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (104, 'TRACE_PROCESS_EVENT_OPENXR', 'OpenXR event');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (105, 'TRACE_PROCESS_EVENT_OPENXR_START', 'OpenXR start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (106, 'TRACE_PROCESS_EVENT_OPENXR_FINISH', 'OpenXR finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (107, 'TRACE_PROCESS_EVENT_SYSCALL', 'Syscall');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (108, 'TRACE_PROCESS_EVENT_TEGRA_INTERNAL', 'Tegra Internal API');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (109, 'TRACE_PROCESS_EVENT_TEGRA_INTERNAL_START', 'Tegra Internal API start');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (110, 'TRACE_PROCESS_EVENT_TEGRA_INTERNAL_FINISH', 'Tegra Internal API finish');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (111, 'TRACE_PROCESS_EVENT_CUDA_GRAPH_EXEC_NODE_SET_PARAMS', 'CUDA graph exec-node set params');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_SOURCE (
    -- Nsys generic event source labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_SOURCE VALUES (0, 'NotSpecified', 'Not Specified');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_SOURCE VALUES (1, 'ClockMonotonicRaw', 'Clock Monotoic Raw');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_SOURCE VALUES (2, 'CntVct', 'Counter-Timer Virtual Count Register');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_SOURCE VALUES (3, 'SessionNs', 'Session Nanoseconds');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_GROUP (
    -- Nsys generic event group labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_GROUP VALUES (0, 'Unknown', 'Unknown');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_GROUP VALUES (1, 'FTrace', 'FTrace');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_GROUP VALUES (2, 'NvMedia', 'NV Media');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_GROUP VALUES (3, 'Hypervisor', 'Hypervisor');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_GROUP VALUES (4, 'ETW', 'ETW');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE (
    -- Nsys generic event field type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE VALUES (0, 'Signed', 'Signed Integer');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE VALUES (1, 'Unsigned', 'Unsigned Integer');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE VALUES (2, 'Float', 'Float');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE VALUES (3, 'Double', 'Double');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY (
    -- Nsys generic event field ETW property flag labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (1, 'PropertyStruct', 'Struct');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (2, 'PropertyParamLength', 'Param Length');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (4, 'PropertyParamCount', 'Param Count');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (8, 'PropertyWBEMXmlFragment', 'WBEM XML Fragment');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (16, 'PropertyParamFixedLength', 'Param Fixed Length');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (32, 'PropertyParamFixedCount', 'Param Fixed Count');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (64, 'PropertyHasTags', 'Has tags');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY VALUES (128, 'PropertyHasCustomSchema', 'Has Custom Schema');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE (
    -- Nsys generic event field ETW type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (0, 'TDH_INTYPE_NULL', 'NULL');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (1, 'TDH_INTYPE_UNICODESTRING', 'Unicode String');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (2, 'TDH_INTYPE_ANSISTRING', 'ANSI String');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (3, 'TDH_INTYPE_INT8', 'int8');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (4, 'TDH_INTYPE_UINT8', 'uint8');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (5, 'TDH_INTYPE_INT16', 'int16');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (6, 'TDH_INTYPE_UINT16', 'uint16');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (7, 'TDH_INTYPE_INT32', 'int32');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (8, 'TDH_INTYPE_UINT32', 'uint32');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (9, 'TDH_INTYPE_INT64', 'int64');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (10, 'TDH_INTYPE_UINT64', 'uint64');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (11, 'TDH_INTYPE_FLOAT', 'float');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (12, 'TDH_INTYPE_DOUBLE', 'double');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (13, 'TDH_INTYPE_BOOLEAN', 'boolean');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (14, 'TDH_INTYPE_BINARY', 'binary data');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (15, 'TDH_INTYPE_GUID', 'GUID');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (16, 'TDH_INTYPE_POINTER', 'Pointer');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (17, 'TDH_INTYPE_FILETIME', 'File-time');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (18, 'TDH_INTYPE_SYSTEMTIME', 'System-time');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (19, 'TDH_INTYPE_SID', 'SID');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (20, 'TDH_INTYPE_HEXINT32', 'Hex int32');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE VALUES (21, 'TDH_INTYPE_HEXINT64', 'Hex int64');

CREATE TABLE ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS (
    -- Nsys generic event field ETW map info flag labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (1, 'EVENTMAP_INFO_FLAG_MANIFEST_VALUEMAP', 'Manifest Value Map');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (2, 'EVENTMAP_INFO_FLAG_MANIFEST_BITMAP', 'Manifest Bitmap');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (4, 'EVENTMAP_INFO_FLAG_MANIFEST_PATTERNMAP', 'Manifest Pattern Map');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (8, 'EVENTMAP_INFO_FLAG_WBEM_VALUEMAP', 'WBEM Value Map');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (16, 'EVENTMAP_INFO_FLAG_WBEM_BITMAP', 'WBEM Bitmap');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (32, 'EVENTMAP_INFO_FLAG_WBEM_FLAG', 'WBEM Flag');
INSERT INTO ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS VALUES (64, 'EVENTMAP_INFO_FLAG_WBEM_NO_MAP', 'WBEM No Map');

CREATE TABLE ENUM_CUDA_MEMCPY_OPER (
    -- CUDA memcpy operation labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0, 'CUDA_MEMCPY_KIND_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (3, 'CUDA_MEMCPY_KIND_HTOA', 'Host-to-Array');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (4, 'CUDA_MEMCPY_KIND_ATOH', 'Array-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (5, 'CUDA_MEMCPY_KIND_ATOA', 'Array-to-Array');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (6, 'CUDA_MEMCPY_KIND_ATOD', 'Array-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (7, 'CUDA_MEMCPY_KIND_DTOA', 'Device-to-Array');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (9, 'CUDA_MEMCPY_KIND_HTOH', 'Host-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (10, 'CUDA_MEMCPY_KIND_PTOP', 'Peer-to-Peer');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (11, 'CUDA_MEMCPY_KIND_UVM_HTOD', 'Unified Host-to-Device');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (12, 'CUDA_MEMCPY_KIND_UVM_DTOH', 'Unified Device-to-Host');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (13, 'CUDA_MEMCPY_KIND_UVM_DTOD', 'Unified Device-to-Device');

CREATE TABLE ENUM_CUDA_MEM_KIND (
    -- CUDA memory kind labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (3, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (4, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (6, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');

CREATE TABLE ENUM_CUDA_MEMPOOL_TYPE (
    -- CUDA mempool type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_MEMPOOL_TYPE VALUES (0, 'CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID', 'Invalid');
INSERT INTO ENUM_CUDA_MEMPOOL_TYPE VALUES (1, 'CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL', 'Local');
INSERT INTO ENUM_CUDA_MEMPOOL_TYPE VALUES (2, 'CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED', 'Imported');

CREATE TABLE ENUM_CUDA_MEMPOOL_OPER (
    -- CUDA mempool operation labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (0, 'CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_INVALID', 'Invalid');
INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (1, 'CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED', 'Created');
INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (2, 'CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED', 'Destroyed');
INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (3, 'CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED', 'Trimmed');

CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (
    -- CUDA device mem event operation labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation');
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');

CREATE TABLE ENUM_CUDA_KERNEL_LAUNCH_TYPE (
    -- CUDA kernel launch type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_KERNEL_LAUNCH_TYPE VALUES (0, 'CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUDA_KERNEL_LAUNCH_TYPE VALUES (1, 'CUDA_KERNEL_LAUNCH_TYPE_REGULAR', 'Regular');
INSERT INTO ENUM_CUDA_KERNEL_LAUNCH_TYPE VALUES (2, 'CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE', 'Coop Single Device');
INSERT INTO ENUM_CUDA_KERNEL_LAUNCH_TYPE VALUES (3, 'CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE', 'Coop Multi Device');

CREATE TABLE ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG (
    -- CUDA shared memory limit config labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG VALUES (0, 'CUDA_SHARED_MEM_LIMIT_DEFAULT', 'Default');
INSERT INTO ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG VALUES (1, 'CUDA_SHARED_MEM_LIMIT_OPTIN', 'Opt in');

CREATE TABLE ENUM_CUDA_UNIF_MEM_MIGRATION (
    -- CUDA unified memory migration cause labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (0, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (1, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_USER', 'User prefetch');
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (2, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE', 'Page fault');
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (3, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH', 'Speculative prefecth');
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (4, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION', 'Eviction');
INSERT INTO ENUM_CUDA_UNIF_MEM_MIGRATION VALUES (5, 'CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS', 'Access counters');

CREATE TABLE ENUM_CUDA_UNIF_MEM_ACCESS_TYPE (
    -- CUDA unified memory access type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_UNIF_MEM_ACCESS_TYPE VALUES (0, 'CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUDA_UNIF_MEM_ACCESS_TYPE VALUES (1, 'CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ', 'Read');
INSERT INTO ENUM_CUDA_UNIF_MEM_ACCESS_TYPE VALUES (2, 'CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE', 'Write');
INSERT INTO ENUM_CUDA_UNIF_MEM_ACCESS_TYPE VALUES (3, 'CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_ATOMIC', 'Atomic');
INSERT INTO ENUM_CUDA_UNIF_MEM_ACCESS_TYPE VALUES (4, 'CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_PREFETCH', 'Prefetch');

CREATE TABLE ENUM_CUDA_FUNC_CACHE_CONFIG (
    -- CUDA function cache config labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUDA_FUNC_CACHE_CONFIG VALUES (0, 'CU_FUNC_CACHE_PREFER_NONE', 'None');
INSERT INTO ENUM_CUDA_FUNC_CACHE_CONFIG VALUES (1, 'CU_FUNC_CACHE_PREFER_SHARED', 'Shared');
INSERT INTO ENUM_CUDA_FUNC_CACHE_CONFIG VALUES (2, 'CU_FUNC_CACHE_PREFER_L1', 'L1');
INSERT INTO ENUM_CUDA_FUNC_CACHE_CONFIG VALUES (3, 'CU_FUNC_CACHE_PREFER_EQUAL', 'Equal');

CREATE TABLE ENUM_CUPTI_STREAM_TYPE (
    -- CUPTI stream type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUPTI_STREAM_TYPE VALUES (0, 'CUPTI_ACTIVITY_STREAM_CREATE_FLAG_UNKNOWN', 'Unknown stream type');
INSERT INTO ENUM_CUPTI_STREAM_TYPE VALUES (1, 'CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT', 'Default stream');
INSERT INTO ENUM_CUPTI_STREAM_TYPE VALUES (2, 'CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING', 'Non-blocking stream');
INSERT INTO ENUM_CUPTI_STREAM_TYPE VALUES (3, 'CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL', 'Null stream');

CREATE TABLE ENUM_CUPTI_SYNC_TYPE (
    -- CUPTI synchronization type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (0, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (1, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE', 'Event sync');
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (2, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT', 'Stream wait sync');
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (3, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE', 'Stream sync');
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (4, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE', 'Context sync');

CREATE TABLE ENUM_CUPTI_OVERHEAD_TYPE (
    -- CUPTI overhead type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (0, 'OVERHEAD_UNDEFINED', 'Undefined');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (1, 'OVERHEAD_UNKNOWN', 'Unknown');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (2, 'OVERHEAD_DRIVER_COMPILER', 'Driver JIT compiler (CUDA)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (3, 'OVERHEAD_CUPTI_BUFFER_FLUSH', 'Buffer flush (Profiler)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (4, 'OVERHEAD_CUPTI_INSTRUMENTATION', 'Instrumentation (Profiler)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (5, 'OVERHEAD_CUPTI_RESOURCE', 'Resource creation/destruction (Profiler)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (6, 'OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING', 'Runtime module loading (CUDA)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (7, 'OVERHEAD_LAZY_FUNCTION_LOADING', 'Lazy function loading (CUDA)');
INSERT INTO ENUM_CUPTI_OVERHEAD_TYPE VALUES (8, 'OVERHEAD_COMMAND_BUFFER_FULL', 'Command buffer full (CUDA)');

CREATE TABLE ENUM_DIAGNOSTIC_SEVERITY_LEVEL (
    -- Diagnostic message severity level labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY_LEVEL VALUES (0, 'UnknownLevel', 'Unknown');
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY_LEVEL VALUES (1, 'Info', 'Info');
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY_LEVEL VALUES (2, 'Warning', 'Warning');
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY_LEVEL VALUES (3, 'Error', 'Error');
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY_LEVEL VALUES (4, 'Verbose', 'Verbose');

CREATE TABLE ENUM_DIAGNOSTIC_SOURCE_TYPE (
    -- Diagnostic message source type labels

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_DIAGNOSTIC_SOURCE_TYPE VALUES (0, 'UnknownSource', 'Unknown source');
INSERT INTO ENUM_DIAGNOSTIC_SOURCE_TYPE VALUES (1, 'Injection', 'Injection');
INSERT INTO ENUM_DIAGNOSTIC_SOURCE_TYPE VALUES (2, 'Daemon', 'Daemon');
INSERT INTO ENUM_DIAGNOSTIC_SOURCE_TYPE VALUES (3, 'Analysis', 'Analysis');

CREATE TABLE ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE (
    -- Diagnostic message timestamp source lables

    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.
    name                        TEXT,                                  -- Enum symbol name.
    label                       TEXT                                   -- Enum human name.
);
INSERT INTO ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE VALUES (0, 'UnknownTimestamp', 'Unknown timestamp');
INSERT INTO ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE VALUES (1, 'TargetTimestamp', 'Target timestamp');
INSERT INTO ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE VALUES (2, 'HostTimestamp', 'Host timestamp');

CREATE TABLE META_DATA_CAPTURE (
    -- information about nsys capture parameters

    name                        TEXT      NOT NULL,                    -- Name of meta-data record
    value                       TEXT                                   -- Value of meta-data record
);
INSERT INTO META_DATA_CAPTURE VALUES ('DEVICE_ID', 'Local (CLI)');
INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', 'NvtxEvents');
INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', 'Cuda');
INSERT INTO META_DATA_CAPTURE VALUES ('RATE_HZ', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('START_TRIGGER', 'Immediate');
INSERT INTO META_DATA_CAPTURE VALUES ('STOP_TRIGGER', 'Delayed');
INSERT INTO META_DATA_CAPTURE VALUES ('THREAD_STATE_SCAN_FREQ', '50');
INSERT INTO META_DATA_CAPTURE VALUES ('POWER_RATE_SCAN_FREQ', '50');
INSERT INTO META_DATA_CAPTURE VALUES ('DEVICE_TYPE', 'Unix');
INSERT INTO META_DATA_CAPTURE VALUES ('DEVICE_DISPLAY_NAME', 'modal');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_GRAPH_TRACE_OPTIONS:MODE', 'Graph');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_GRAPH_TRACE_OPTIONS:TRACE_DEVICE_GRAPH_LAUNCH', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_FLUSH_PERIODICALLY', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_FLUSH_PERIOD', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_SKIP_SOME_API_CALLS', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_GPU_MEMORY_USAGE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_UVM_CPU_PAGE_FAULTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_UVM_GPU_PAGE_FAULTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_FLUSH_ON_CUDA_PROFILER_STOP', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('CUDA_TRACE_SCOPE', 'ProcessTree');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:HOW_TO_ATTACH', 'LaunchAnother');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:LAUNCH_AS_ROOT', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COMMAND', 'torchrun');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:WORKING_DIR', '/FastVideo');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:PID', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:USER_NAME', '');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_NVTX_TRACE', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_CUDA_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_CPU_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_NVMEDIA_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_VIDEO_API_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:CUDA_FLUSH_PERIODICALLY', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:CUDA_FLUSH_PERIOD', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:CUDA_SKIP_SOME_API_CALLS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_GPU_MEMORY_USAGE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_UVM_CPU_PAGE_FAULTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_UVM_GPU_PAGE_FAULTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_GL_WORKLOAD', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_DX12_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_DX11_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COLLECT_VULKAN_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:CUDA_FLUSH_ON_CUDA_PROFILER_STOP', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('PROFILING_SESSION_ID', '');
INSERT INTO META_DATA_CAPTURE VALUES ('PROFILING_SESSION_UUID', '555bdc01-81fb-4160-8dda-3d5c1a8eda03');
INSERT INTO META_DATA_CAPTURE VALUES ('APPLICATION_PID', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('PACKAGE_NAME', '');
INSERT INTO META_DATA_CAPTURE VALUES ('RESUME', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('SHOW_BACKTRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('START_DELAY_MS', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('RUN_DURATION_MS', '119444');
INSERT INTO META_DATA_CAPTURE VALUES ('HAS_ANNOTATIONS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('USE_UNWIND_TABLES', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('USE_FRAME_POINTERS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('USE_DWARF', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('BANDWIDTH_VERSION', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('BANDWIDTH_RATE_HZ', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_GPU_CTX_SW_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('TRACE_ALL_TASKS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('IN_APP_FREQ_MODE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_VSYNC', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_THREAD_STATE_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('ALLOW_SEND_ONLY_MODE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('FORCE_ARCH_TIMER', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('USE_LBRS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('INCLUDE_CHILDREN', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('USE_LINUX_PERF', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('DISABLE_TIME_SYNC', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('LAUNCH_AS_ROOT', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('TRACE_AFTER_FORK_BEFORE_EXEC', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_SLI_EVENTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('HOTKEY_ENABLED', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('HOTKEY_VALUE', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_WDDM_EVENTS', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY_VALUE', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('NVTX_OPTIONS:NVTX_DOMAIN_FILTER_STRING', '');
INSERT INTO META_DATA_CAPTURE VALUES ('NVTX_OPTIONS:NVTX_DOMAIN_FILTER_MODE_INCLUDE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('COLLECT_OPENSHMEM_TRACE', 'false');
INSERT INTO META_DATA_CAPTURE VALUES ('START_FRAME_VALUE', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('RUN_DURATION_FRAMES', '0');
INSERT INTO META_DATA_CAPTURE VALUES ('SYMBOL_RESOLUTION_OPTIONS:RESOLVE_SYMBOLS', 'true');
INSERT INTO META_DATA_CAPTURE VALUES ('SAMPLE_ALL_TASKS', 'false');

CREATE TABLE META_DATA_EXPORT (
    -- information about nsys export process

    name                        TEXT      NOT NULL,                    -- Name of meta-data record
    value                       TEXT                                   -- Value of meta-data record
);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2026.2.1.210');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_DATE', '2026.2');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.25.0');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION_MAJOR', '3');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION_MINOR', '25');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION_MICRO', '0');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION_CKSUM', '306658267 182758');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PLATFORM', 'linux-desktop');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_ARCH', 'x64');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_TIME_UTC', '2026-05-26T08:01:27');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_TIME_LOCAL', '2026-05-26T08:01:27 +0000 UTC');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_HOST', 'modal');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_USER', '');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_EXPORT_TYPE', 'SQLite');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INPUT_FILE', 'mfu_h1002_nsys.nsys-rep');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_OUTPUT_FILE', 'mfu_h1002_nsys.sqlite');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INPUT_PATH', '/tmp/mfu_h1002_nsys.nsys-rep');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_OUTPUT_PATH', '/tmp/mfu_h1002_nsys.sqlite');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INPUT_PATH_ABS', '/tmp/mfu_h1002_nsys.nsys-rep');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_OUTPUT_PATH_ABS', '/tmp/mfu_h1002_nsys.sqlite');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_PROGRESS', 'true');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_OVERWRITE', 'true');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_APPEND', 'false');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_LAZY', 'true');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_USE_SHUFFLE', 'true');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INCLUDE_JSON', 'false');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INCLUDE_BLOBS', 'false');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_TIME_NORMALIZE', 'false');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_TIME_SHIFT', '0');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_TABLES_TO_EXPORT', '');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_TIMES_TO_EXPORT', '');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_CONFIG_TIME_SHIFT', '0');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_TIME', '20.03 sec');
