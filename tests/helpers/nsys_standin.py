"""A stand-in `nsys` for the tests of the launcher and export: first on PATH, it records
its arguments, writes placeholder reports and runs the program (its faults set by
`NSYS_STANDIN_*` variables); and the host name and manifest of a launch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nsyswrap.annotate.ranks import short_host

HOST = short_host()

STANDIN = """#!{python} -I
# Stand-in for nsys: logs its arguments, writes placeholder reports, runs the program.
import json, os, signal, subprocess, sys
args = sys.argv[1:]
with open(os.environ["NSYS_STANDIN_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA Nsight Systems version " + os.environ.get("NSYS_STANDIN_VERSION", "2022.4.2.1-standin"))
    sys.exit(0)
options = dict(a.partition("=")[::2] for a in args[1:] if a.startswith("--"))
if args[0] == "export":
    if os.environ.get("NSYS_STANDIN_EXPORT_HANG"):  # stuck: writes nothing, uses no CPU
        signal.pause()
    if os.environ.get("NSYS_STANDIN_EXPORT_FAIL"):
        sys.exit("Error: the report is damaged")
    open(options["--output"], "w").write("sqlite of " + args[-1])
    sys.exit(0)
program = next(i for i, a in enumerate(args) if i > 0 and not a.startswith("-"))
flaky = os.environ.get("NSYS_STANDIN_FAIL_ONCE")  # die before the program starts, once, leaving an agent
# (-I: like nsys's agent, not a Python program that would report itself as started)
if flaky and not os.path.exists(flaky):
    agent = subprocess.Popen([sys.executable, "-I", "-c", "import time; time.sleep(120)", "--start-agent"],
                             start_new_session=True)
    open(flaky, "w").write(str(agent.pid))
    sys.exit(1)
open(options["--output"] + os.environ.get("NSYS_STANDIN_SUFFIX", ".nsys-rep"), "w").write("report")
child = subprocess.Popen(args[program:])
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda signum, frame: child.send_signal(signum))
code = child.wait()
if os.environ.get("NSYS_STANDIN_HANG"):  # stuck after the program ended (as nsys 2022.4 can be)
    while True:
        signal.pause()
sys.exit(128 - code if code < 0 else code)
"""  # noqa: E501  (the stand-in's program text kept as written)


class Standin:
    def __init__(self, folder: Path):
        self.bin, self.log = folder / "bin", folder / "nsys-calls.jsonl"
        self.bin.mkdir()
        (self.bin / "nsys").write_text(STANDIN.format(python=sys.executable))
        (self.bin / "nsys").chmod(0o755)

    def calls(self, command: str = "profile") -> list[list[str]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [args for args in map(json.loads, lines) if args[0] == command]


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())
