"""`python -m nsyswrap.synth`: rewrite the repository's fixtures deterministically.

Other scenarios are generated with `nsyswrap generate` (see `nsyswrap generate --help`).
"""

from nsyswrap.synth.fixtures import write_fixtures

for out in write_fixtures():
    print(f"wrote {out}")
