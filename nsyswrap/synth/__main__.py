"""`python -m nsyswrap.synth [fixtures]`: rewrite the repository's fixtures deterministically.

Other scenarios are generated with `nsyswrap generate` (see `nsyswrap generate --help`).
"""

import sys

from nsyswrap.synth.fixtures import write_fixtures

USAGE = (
    "usage: python -m nsyswrap.synth [fixtures]  (rewrites fixtures/; "
    "other scenarios: nsyswrap generate --help)"
)

args = sys.argv[1:]
if args in (["-h"], ["--help"]):
    print(USAGE)
elif args not in ([], ["fixtures"]):
    sys.exit(f"python -m nsyswrap.synth: unknown arguments {' '.join(args)!r}; {USAGE}")
else:
    for out in write_fixtures():
        print(f"wrote {out}")
