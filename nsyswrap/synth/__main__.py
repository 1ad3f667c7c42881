"""Generate synthetic nsys 2026.2 SQLite reports (one per rank) with planted ground truth."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.synth.fixtures import DEFAULT_ROOT, write_fixtures
from nsyswrap.synth.presets import PRESETS, load_scenario
from nsyswrap.synth.run import generate_run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nsyswrap.synth", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fixtures", help="(re)write the repository fixtures deterministically")
    f.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="fixtures directory (default: %(default)s)")
    g = sub.add_parser("generate", help="write rank{N}.sqlite + truth.json for a scenario")
    g.add_argument("scenario", help=f"preset ({', '.join(PRESETS)}) or a scenario .json file")
    g.add_argument("out_dir", type=Path, help="output directory")
    g.add_argument("--ranks", type=int, help="number of ranks")
    g.add_argument("--steps", type=int, help="training steps per rank")
    g.add_argument("--kernels-per-step", type=int, help="compute kernels per step and device")
    g.add_argument("--seed", type=int, help="random seed")
    g.add_argument("--force", action="store_true", help="overwrite existing reports in OUT_DIR")
    s = sub.add_parser("show", help="print a scenario as JSON")
    s.add_argument("scenario", help="preset name or scenario .json file")
    sub.add_parser("list", help="list the preset scenarios")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "fixtures":
            for out in write_fixtures(args.root):
                print(f"wrote {out}")
        elif args.command == "generate":
            began = time.perf_counter()
            scenario = load_scenario(args.scenario, ranks=args.ranks, steps=args.steps,
                                     kernels_per_step=args.kernels_per_step, seed=args.seed)
            truth = generate_run(scenario, args.out_dir, force=args.force)
            kernels = sum(r["kernels"] for r in truth.ranks)
            print(f"wrote {len(truth.ranks)} reports ({kernels} kernels) + truth.json to {args.out_dir} "
                  f"in {time.perf_counter() - began:.1f} s")
        elif args.command == "show":
            print(json.dumps(load_scenario(args.scenario).to_dict(), indent=1))
        else:
            for name, (about, _) in PRESETS.items():
                print(f"{name:16} {about}")
    except NsysWrapError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
