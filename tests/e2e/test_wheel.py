"""The wheel carries every SQL file, and an installed wheel finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from helpers.paths import ROOT

from nsyswrap.storage.sql_files import sql_root


def test_wheel_ships_sql(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("nsyswrap-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"nsyswrap/sql/{p.relative_to(sql_root()).as_posix()}" for p in sql_root().rglob("*.sql")
    }
    assert expected and expected <= names

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from nsyswrap.storage.sql_files import sql_root; print(sql_root())",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(site)},
    ).stdout.strip()
    assert found == str(site / "nsyswrap" / "sql")
