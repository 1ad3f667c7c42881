"""Exported rows may come in any order (Nsight Systems 2025.6 says so): the report of a
copy of a fixture whose every table lists its rows shuffled is byte-identical."""

from __future__ import annotations

import shutil

import pytest
from helpers.paths import FIXTURES
from helpers.shuffled import report_json, shuffled_copy

from nsyswrap.report import ReportOptions


@pytest.mark.parametrize("fixture", ["run2", "edge_cases"])
@pytest.mark.parametrize("options", [ReportOptions(), ReportOptions.parse("1:3")])
def test_report_is_identical_on_shuffled_rows(tmp_path, fixture, options):
    original = shutil.copytree(FIXTURES / fixture, tmp_path / "original" / "run")
    shuffled = shuffled_copy(FIXTURES / fixture, tmp_path / "shuffled" / "run")
    assert report_json(original, options) == report_json(shuffled, options)
