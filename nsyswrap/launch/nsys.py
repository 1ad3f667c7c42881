"""The nsys CLI: finding and checking it, one rank's `nsys profile` command, and .qdstrm rescue."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from nsyswrap.annotate.ranges import DOMAIN
from nsyswrap.annotate.steps import CAPTURE_RANGE
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig

MIN_VERSION = (2021, 1)
# nsyswrap's defaults for training; an --nsys-arg naming the same option replaces the default.
DEFAULTS = {"--sample": "none", "--cpuctxsw": "none"}
QDSTRM_FIX = ("nsys could not find its QdstrmImporter; on Debian link "
              "/usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64 to /usr/lib/nsight-systems/host-linux-x64 "
              "(.ci/install-nsys.sh does), or run `QdstrmImporter -i FILE.qdstrm` from the nsys installation")


def find_nsys(name: str = "nsys") -> tuple[str, str]:
    """(absolute path, version) of nsys; NsysWrapError when it is missing, broken or too old."""
    path = shutil.which(name)
    if path is None:
        raise NsysWrapError(name, "was not found on PATH",
                            "install NVIDIA Nsight Systems (on Debian: bash .ci/install-nsys.sh) or pass --nsys PATH")
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysWrapError(path, f"does not run ({exc})", "reinstall Nsight Systems") from None
    found = re.search(r"\b(20\d\d)\.(\d+)(?:\.\d+)*", done.stdout + done.stderr)
    if done.returncode != 0 or found is None:
        raise NsysWrapError(path, "did not print an Nsight Systems version", "check that it is NVIDIA's nsys")
    if (int(found.group(1)), int(found.group(2))) < MIN_VERSION:
        raise NsysWrapError(path, f"is Nsight Systems {found.group(0)}, older than {MIN_VERSION[0]}.{MIN_VERSION[1]}",
                            "install a newer Nsight Systems")
    return path, found.group(0)


def report_stem(out: Path, host: str, rank: int) -> Path:
    """`<out>/<host>.rank<N>`: nsys adds .nsys-rep, export adds .sqlite."""
    return Path(out) / f"{host}.rank{rank}"


def nsys_argv(rank: int, cfg: LaunchConfig, host: str) -> list[str]:
    """`nsys profile ... <cfg.command>` for this rank (cfg.command is the rank's own program)."""
    options = dict(DEFAULTS)
    if cfg.window is not None:
        options["--capture-range"] = "nvtx"
        options["--nvtx-capture"] = f"{CAPTURE_RANGE}@{DOMAIN}"
        options["--capture-range-end"] = "repeat" if cfg.window.every else "stop"
    if cfg.force:
        options["--force-overwrite"] = "true"
    given = {arg.split("=")[0] for arg in cfg.nsys_args}
    argv = [cfg.nsys, "profile", f"--trace={cfg.trace}"]
    argv += [f"{name}={value}" for name, value in options.items() if name not in given]
    argv += [*cfg.nsys_args, f"--output={report_stem(cfg.out, host, rank)}"]
    return argv + list(cfg.command)


def rescue_qdstrm(qdstrm: Path, nsys: str = "nsys") -> Optional[Path]:
    """Import a .qdstrm that nsys left behind into a .nsys-rep; None when no importer is found."""
    importer = find_importer(nsys)
    if importer is None:
        return None
    subprocess.run([str(importer), "-i", str(qdstrm)], capture_output=True)
    report = qdstrm.with_suffix(".nsys-rep")
    return report if report.exists() else None


def find_importer(nsys: str = "nsys") -> Optional[Path]:
    real = Path(shutil.which(nsys) or nsys).resolve()
    candidates = [real.parent.parent / "host-linux-x64" / "QdstrmImporter",
                  Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter")]
    on_path = shutil.which("QdstrmImporter")
    return next((c for c in [*candidates, on_path] if c and Path(c).is_file()), None)
