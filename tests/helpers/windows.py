"""Windows of many kinds, for the tests that compare what a window reads off the reports."""

# steps, open ends, NVTX spans, both; step ranges of other patterns put the window's edges
# inside kernels and inside idle gaps (the CPU ranges end before or while the GPU works);
# `bwd:%` has step ranges that start together (tests/sql/test_step_ties.py)
WINDOWS = [
    {},
    {"step_from": 1, "step_to": 3},
    {"step_from": 2},
    {"step_to": 2},
    {"window_nvtx": "bwd:head"},
    {"window_nvtx": "ncclAllReduce"},
    {"window_nvtx": "forward", "step_from": 1, "step_to": 2},
    {"step_pattern": "fwd:layers.%", "step_to": 1},
    {"step_pattern": "bwd:embed", "step_from": 0},
    {"step_pattern": "fwd:head", "step_from": 1, "step_to": 3},
    {"step_pattern": "bwd:%"},
    {"step_pattern": "bwd:%", "step_from": 1, "step_to": 7},
]
