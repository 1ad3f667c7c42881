"""Byte-identity of `nsyswrap report` across a refactor: record its output once, check it later.

    python -m bench.json_identity record DIR    # at the starting commit
    python -m bench.json_identity check DIR     # after every step: exit 1 on any difference
    python -m bench.json_identity list          # the cases, one a line

DIR lies outside the repository (e.g. /work/wt/r40-baseline). `record` generates the
presets' runs into DIR/runs (once: `check` reads the same files, so the paths the JSON
names are the same), then writes each case's output into DIR/expected; `check` writes
them into DIR/actual and compares byte for byte. Every case runs `nsyswrap report` in its
own process with NSYSWRAP_CACHE_DIR=DIR/cache (the reports' views are normalized once)
and no stored answer (DIR/cache/answers is emptied before each): what is compared is
what the code computes, not what it stored.

The cases (`cases`): every fixture, every export in ../shared/nsys-sqlite (each public
one alone, real-mpi as one run, real-fsdp's three), the generator's presets, window and
MFU options, sample files alone and beside exports, each as `--format json`; a few also
as the terminal table (80 and 120 columns) and as the HTML page. `-k TEXT` keeps the
cases whose name holds TEXT; `-j N` runs N at a time (the machine is shared: 2 by
default).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "nsys-sqlite"
PRESETS = (
    "mismatch",
    "hybrid8",
    "dp_straggler",
    "intermittent",
    "moe8",
    "moe8_kernels",
    "moe8_same_work",
    "pipeline8",
    "pipeline8_same_work",
    "clock_jump8",
    "stream_wait",
    "dp6_lag",
    "long_wait",
)
FIXTURES = ("fixtures/run2", "fixtures/run4_straggler", "fixtures/edge_cases")
REAL = (
    "h100_ddp_gloo",
    "h100_cuda_graphs",
    "h200_ddp_gloo_slow",
    "h200_ddp_gloo_slow_zero_code",
    "h200_fix_clean",
    "h200_fix_slow",
)
SAMPLED = ("h200_sampled", "h200_sampled_zero_code")
JSON = ("--format", "json")


def cases(runs: Path) -> dict[str, list[str]]:
    """name: the arguments of `nsyswrap report` after the inputs' options (paths relative
    to the repository root where they are in it); the output file is added by `run`."""
    out: dict[str, list[str]] = {}
    for f in FIXTURES:
        out[Path(f).name] = [f, *JSON]
    for r in REAL:
        out[f"real_{r}"] = [f"fixtures/real/{r}", *JSON]
    for s in SAMPLED:
        out[f"samples_{s}"] = [*_samples(s), *JSON]
    out["samples_beside_exports"] = ["fixtures/real/h200_fix_slow", *_samples(SAMPLED[0]), *JSON]
    for p in sorted((SHARED / "public").glob("*.sqlite")):
        out[f"public_{p.stem}"] = [str(p), *JSON]
    out["real_mpi"] = [*map(str, sorted((SHARED / "real-mpi").glob("*.sqlite"))), *JSON]
    out["real_fsdp"] = [str(SHARED / "real-fsdp" / "fsdp2_nccl1.sqlite"), *JSON]
    out["real_fsdp_launched"] = [str(SHARED / "real-fsdp" / "launched"), *JSON]
    out["real_fsdp_memory"] = [str(SHARED / "real-fsdp" / "memory"), *JSON]
    for p in PRESETS:
        out[f"preset_{p}"] = [str(runs / p), *JSON]
    out |= _variants(runs)
    return out


def _samples(name: str) -> list[str]:
    return [
        str(p.relative_to(ROOT)) for p in sorted((ROOT / "fixtures/real" / name).glob("*.jsonl"))
    ]


def _variants(runs: Path) -> dict[str, list[str]]:
    """Options that choose another window, pattern or MFU input, and other outputs."""
    four, two = "fixtures/run4_straggler", "fixtures/run2"
    real = "fixtures/real/h200_ddp_gloo_slow"
    return {
        "steps_2_6": [four, "--steps", "2:6", *JSON],
        "steps_from_3": [four, "--steps", "3:", *JSON],
        "steps_hybrid8_1_4": [str(runs / "hybrid8"), "--steps", "1:4", *JSON],
        "whole_capture": [four, "--whole-capture", *JSON],
        "whole_capture_real": [real, "--whole-capture", *JSON],
        "window_nvtx": [two, "--window-nvtx", "fwd:%", *JSON],
        "step_pattern_given": [str(runs / "dp6_lag"), "--step-pattern", "step:%", *JSON],
        "step_pattern_subset": [four, "--step-pattern", "step:1%", *JSON],
        "step_pattern_none": [two, "--step-pattern", "no such range%", *JSON],
        "mfu_flops": [real, "--flops-per-step", "2e12", *JSON],
        "mfu_params": [
            "fixtures/real/h100_ddp_gloo",
            "--model-params",
            "7e6",
            "--tokens-per-step",
            "2048",
            "--peak-tflops",
            "400",
            *JSON,
        ],
        "table_80_run4": [four, "--format", "table", "@80"],
        "table_120_hybrid8": [str(runs / "hybrid8"), "--format", "table", "@120"],
        "table_100_real": [real, "--format", "table", "@100"],
        "table_100_samples": [*_samples(SAMPLED[0]), "--format", "table", "@100"],
        "table_detail_diagnosis": [four, "--format", "table", "--section", "diagnosis", "@100"],
        "html_run4": [four, *JSON, "--html", "@html"],
        "html_hybrid8": [str(runs / "hybrid8"), *JSON, "--html", "@html"],
        "html_real": [real, *JSON, "--html", "@html"],
        "html_edge": ["fixtures/edge_cases", *JSON, "--html", "@html"],
        "html_samples": [*_samples(SAMPLED[1]), *JSON, "--html", "@html"],
    }


def _generate(runs: Path) -> None:
    for p in PRESETS:
        if not (runs / p / "truth.json").is_file():
            subprocess.run(
                [sys.executable, "-m", "nsyswrap", "generate", p, str(runs / p)], check=True
            )


def run(name: str, args: list[str], into: Path, cache: Path) -> str | None:
    """Write case `name`'s output(s) into `into` (name.out, and name.html for a page);
    None, or the error of a run that failed."""
    width = next((a[1:] for a in args if a.startswith("@") and a[1:].isdigit()), "100")
    argv = []
    for a in args:
        if a == "@html":
            argv.append(str(into / f"{name}.html"))
        elif not (a.startswith("@") and a[1:].isdigit()):
            argv.append(a)
    env = {**os.environ, "NSYSWRAP_CACHE_DIR": str(cache), "COLUMNS": width, "NO_COLOR": "1"}
    shutil.rmtree(cache / "answers", ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "nsyswrap",
        "report",
        *argv,
        "-o",
        str(into / f"{name}.out"),
        "--force",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    (into / f"{name}.rc").write_text(f"{done.returncode}\n")
    return None if done.returncode == 0 else done.stderr.strip()[-2000:]


def _run_all(todo: dict[str, list[str]], into: Path, cache: Path, jobs: int) -> None:
    into.mkdir(parents=True, exist_ok=True)
    # one cache directory per worker: emptying one's answers never races another's
    slots = [cache.with_name(f"{cache.name}{i}") for i in range(jobs)]

    def one(item: tuple[int, tuple[str, list[str]]]) -> None:
        i, (name, args) = item
        error = run(name, args, into, slots[i % jobs])
        print(f"{name}: {'ok' if error is None else 'FAILED ' + error}", flush=True)

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, enumerate(todo.items())))


def _compare(expected: Path, actual: Path, names: list[str]) -> list[str]:
    """The files that differ or are missing on one side."""
    bad = []
    for name in names:
        for ext in (".out", ".rc", ".html"):
            e, a = expected / f"{name}{ext}", actual / f"{name}{ext}"
            if not e.exists() and not a.exists():
                continue
            if not (e.exists() and a.exists() and filecmp.cmp(e, a, shallow=False)):
                bad.append(f"{name}{ext}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.json_identity", description=__doc__.split("\n")[0]
    )
    ap.add_argument("what", choices=("record", "check", "list"))
    ap.add_argument("dir", nargs="?", type=Path)
    ap.add_argument("-k", default="", help="only the cases whose name holds this text")
    ap.add_argument("-j", type=int, default=2, help="cases at a time")
    a = ap.parse_args(argv)
    if a.what == "list":
        for name, args in cases(Path("DIR/runs")).items():
            print(name, " ".join(args))
        return 0
    if a.dir is None:
        ap.error("DIR is needed")
    d = a.dir.resolve()
    if d == ROOT or ROOT in d.parents:
        ap.error("DIR must lie outside the repository")
    _generate(d / "runs")
    todo = {n: c for n, c in cases(d / "runs").items() if a.k in n}
    into = d / ("expected" if a.what == "record" else "actual")
    if a.what == "check" or not a.k:
        shutil.rmtree(into, ignore_errors=True)
    _run_all(todo, into, d / "cache", a.j)
    if a.what == "record":
        print(f"recorded {len(todo)} case(s) in {into}")
        return 0
    bad = _compare(d / "expected", into, list(todo))
    for b in bad:
        print(f"DIFFERS: {b}  (diff {d / 'expected' / b} {into / b})")
    print(f"{len(todo) - len({b.rsplit('.', 1)[0] for b in bad})} of {len(todo)} case(s) identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
