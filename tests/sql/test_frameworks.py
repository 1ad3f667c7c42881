"""trace.frameworks' Inductor sign (#38 item 7: advice to compile only a program that is
not compiled): torch.compile's generated Triton kernels (triton_poi_, triton_red_,
triton_per_, triton_tem_, triton_for_) mark the program as compiled; a user's own Triton
kernel or a cuBLAS kernel does not. The issue's held-out capture (a GPT under
torch.compile, 9,252 triton_* kernels) is not in the project, nor any real capture with
Inductor kernels: hand-made reports stand for it."""

from __future__ import annotations

import pytest
from helpers.real_captures import CAPTURES
from helpers.report_builder import make_report

import nsyswrap

INDUCTOR = [
    "triton_poi_fused_add_0",
    "triton_red_fused_native_layer_norm_1",
    "triton_per_fused__softmax_2",
    "triton_tem_fused_mm_3",
]
OTHERS = ["my_triton_kernel", "triton_my_own_kernel", "nvjet_sm90_tst_128x256", "elementwise"]


def _inductor(tmp_path, names: list[str]) -> int:
    kernels = [(i * 100, i * 100 + 50, 0, 7, name) for i, name in enumerate(names)]
    path = make_report(tmp_path / "rank0.sqlite", kernels=kernels)
    rows = nsyswrap.query("trace.frameworks", [path])
    return int(rows[rows["framework"] == "inductor"]["matches"].sum())


def test_inductors_kernels_mark_a_compiled_program(tmp_path):
    assert _inductor(tmp_path, INDUCTOR + OTHERS) == len(INDUCTOR)


def test_other_kernels_do_not(tmp_path):
    assert _inductor(tmp_path, OTHERS) == 0


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_no_real_capture_is_compiled(name):
    rows = nsyswrap.query("trace.frameworks", CAPTURES[name])
    assert rows[rows["framework"] == "inductor"]["matches"].sum() == 0
