-- Table macros shared by the cross-rank modules (sql/crossrank/*.sql): matching
-- collectives across ranks, clock alignment, step and phase ranges. `open_run` creates
-- them after the views; names start with xr_ so they cannot collide with the metric
-- macros. A macro may only use macros defined above it. They read the per-rank
-- reductions of sql/_reductions (views xr_rank_keys, xr_steps, xr_phases, ...:
-- computed once per report), small views (session, collectives) and the run-scope
-- tables made once per run in Python by nsyswrap.crossrank.solve (xr_keys, xr_groups,
-- xr_clock, xr_aligned, xr_member_steps, xr_member_phases: ranks, matching, the clock
-- solve and per-collective timing; a report may hold several ranks), never the
-- large views (kernels, launches, nvtx, api_calls): per-rank work over those belongs in
-- a reduction. DuckDB binds the names in a macro where it is used: a CTE of the caller
-- named like a view or reduction (kernels, xr_steps, ...) would replace it inside the
-- macro, so modules must not use such names.
-- Times are session ns unless a column says run time (ns since the reference rank's
-- aligned session start: session ns + shift_ns + drift_ppb x session ns / 1e9). Step
-- arguments: p_step_from / p_step_to (half-open step numbers, NULL: unbounded).

-- ASOF joins must stay sort-merge joins (see metrics.sql).
SET asof_loop_join_threshold = 0;

-- Stand-ins for the run-scope tables until nsyswrap.crossrank.solve makes them (it
-- replaces these views before this file is loaded on a run; elsewhere, e.g. while
-- reductions are built, reading them fails).
CREATE TEMP VIEW IF NOT EXISTS xr_keys AS
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS BIGINT) AS seq,
    CAST(NULL AS VARCHAR) AS op,
    CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS BIGINT) AS cpu_start_ns,
    CAST(NULL AS BIGINT) AS cpu_end_ns,
    CAST(NULL AS BIGINT) AS kernel_start_ns,
    CAST(NULL AS BIGINT) AS kernel_end_ns,
    CAST(NULL AS BIGINT) AS group_ranks,
    CAST(NULL AS BIGINT) AS ranks,
    CAST(NULL AS BOOLEAN) AS duplicate,
    CAST(NULL AS BOOLEAN) AS op_differs,
    CAST(NULL AS BOOLEAN) AS bytes_differ,
    CAST(NULL AS BOOLEAN) AS matches,
    CAST(NULL AS VARCHAR) AS found_by,
    CAST(NULL AS BOOLEAN) AS size_differs
WHERE error('xr_keys is read before the cross-rank solve');

CREATE TEMP VIEW IF NOT EXISTS xr_groups AS
SELECT
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS VARCHAR) AS found_by,
    CAST(NULL AS VARCHAR) AS members,
    CAST(NULL AS BIGINT) AS captured,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS VARCHAR) AS status,
    CAST(NULL AS BOOLEAN) AS spans_hosts
WHERE error('xr_groups is read before the cross-rank solve');

CREATE TEMP VIEW IF NOT EXISTS xr_clock AS
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS utc_epoch_ns,
    CAST(NULL AS BIGINT) AS offset_ns,
    CAST(NULL AS DOUBLE) AS drift_ppb,
    CAST(NULL AS BIGINT) AS shift_ns,
    CAST(NULL AS BIGINT) AS uncertainty_ns,
    CAST(NULL AS BIGINT) AS spread_ns,
    CAST(NULL AS BIGINT) AS max_residual_ns,
    CAST(NULL AS BIGINT) AS collectives,
    CAST(NULL AS VARCHAR) AS source,
    CAST(NULL AS VARCHAR) AS method,
    CAST(NULL AS BOOLEAN) AS aligned,
    CAST(NULL AS VARCHAR) AS host,
    CAST(NULL AS INTEGER) AS report_rank,
    CAST(NULL AS BIGINT) AS pid,
    CAST(NULL AS VARCHAR) AS rank_source
WHERE error('xr_clock is read before the cross-rank solve');

CREATE TEMP VIEW IF NOT EXISTS xr_aligned AS
SELECT
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS BIGINT) AS seq,
    CAST(NULL AS VARCHAR) AS op,
    CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS BOOLEAN) AS on_gpu,
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS wait_ns,
    CAST(NULL AS BIGINT) AS lag_ns,
    CAST(NULL AS INTEGER) AS last_rank,
    CAST(NULL AS BIGINT) AS skew_ns,
    CAST(NULL AS BIGINT) AS transfer_ns,
    CAST(NULL AS BIGINT) AS threshold_ns,
    CAST(NULL AS BOOLEAN) AS significant
WHERE error('xr_aligned is read before the cross-rank solve');

CREATE TEMP VIEW IF NOT EXISTS xr_member_steps AS
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns
WHERE error('xr_member_steps is read before the cross-rank solve');

CREATE TEMP VIEW IF NOT EXISTS xr_member_phases AS
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS pid,
    CAST(NULL AS BIGINT) AS tid,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS VARCHAR) AS phase,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS host_ns,
    CAST(NULL AS BIGINT) AS gpu_ns
WHERE error('xr_member_phases is read before the cross-rank solve');

-- One row per rank and collective call of the kind chosen for the run (coll: ranges,
-- MPI ranges or NCCL kernels per stream; see nsyswrap.crossrank.matching), with its
-- key (pg, seq) and verdict: group_ranks (ranks with calls in the group), ranks (with
-- this key), duplicate, op_differs, bytes_differ, size_differs, matches (NULL for groups seen on one
-- rank only).
CREATE OR REPLACE MACRO xr_collective_keys() AS TABLE
SELECT * FROM xr_keys;

-- One row per rank (its clock: xr_clock) and matched collective, plus one row (pg and
-- seq NULL) per rank with none. Per collective, in run time: arrival (start_ns) and
-- end, by the NCCL kernels when every member has them (on_gpu), else by the ranges;
-- the step (lowest over the ranks); the wait before the last rank arrived; lag behind
-- the median arrival; the last rank (lowest on ties); skew; transfer time (shortest
-- duration across ranks); threshold_ns (twice the largest alignment uncertainty of
-- the members) and significant (skew above it). Unaligned ranks have no collectives.
CREATE OR REPLACE MACRO xr_alignment() AS TABLE
SELECT
    o.rank,
    o.utc_epoch_ns,
    o.offset_ns,
    o.shift_ns,
    o.drift_ppb,
    o.collectives,
    o.source,
    o.aligned,
    c.pg,
    c.seq,
    c.op,
    c.bytes,
    c.group_size,
    c.on_gpu,
    c.step,
    c.start_ns,
    c.end_ns,
    c.wait_ns,
    c.lag_ns,
    c.last_rank,
    c.skew_ns,
    c.transfer_ns,
    c.threshold_ns,
    c.significant
FROM xr_clock AS o
LEFT JOIN xr_aligned AS c
    ON c.rank = o.rank;

-- One row per rank: its clock (see nsyswrap.crossrank.alignment): offset, drift, shift,
-- uncertainty, residual spread, collectives it rests on, source and method, aligned.
CREATE OR REPLACE MACRO xr_clock_offsets() AS TABLE
SELECT * FROM xr_clock;

-- One row per rank and matched collective of steps [p_step_from, p_step_to), in run
-- time (see xr_alignment).
CREATE OR REPLACE MACRO xr_collectives(p_step_from, p_step_to) AS TABLE
SELECT
    pg,
    seq,
    op,
    bytes,
    group_size,
    on_gpu,
    rank,
    step,
    start_ns,
    end_ns,
    wait_ns,
    lag_ns,
    last_rank,
    skew_ns,
    transfer_ns,
    threshold_ns,
    significant
FROM xr_alignment()
WHERE pg IS NOT NULL
    AND (p_step_from IS NULL OR step >= p_step_from)
    AND (p_step_to IS NULL OR step < p_step_to);

-- One row per (step, rank, phase) of steps [p_step_from, p_step_to) (phases and their
-- host and GPU time: see sql/_reductions/xr_phases.sql; by rank: xr_member_phases): summed duration, host time
-- and GPU time, and the medians of both over the ranks that have the phase in the step.
CREATE OR REPLACE MACRO xr_phase_lag(p_step_from, p_step_to) AS TABLE
SELECT
    step,
    rank,
    phase,
    sum(end_ns - start_ns)::BIGINT AS dur_ns,
    sum(host_ns)::BIGINT AS host_ns,
    round(median(sum(host_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS host_median_ns,
    sum(gpu_ns)::BIGINT AS gpu_ns,
    round(median(sum(gpu_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS gpu_median_ns
FROM xr_member_phases
WHERE (p_step_from IS NULL OR step >= p_step_from)
    AND (p_step_to IS NULL OR step < p_step_to)
GROUP BY step, rank, phase;
