"""Hypothesis profiles, chosen by $HYPOTHESIS_PROFILE: `dev` (the default: few examples,
for a quick look) and `ci` (what `.ci/run` sets: each property test's own number of
examples, hypothesis' default where it names none)."""

from __future__ import annotations

import os

from hypothesis import settings

DEV_EXAMPLES = 10
PROFILES = {"dev": {"max_examples": DEV_EXAMPLES}, "ci": {}}


def profile() -> str:
    """The profile $HYPOTHESIS_PROFILE names (dev when unset)."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: use one of {', '.join(PROFILES)}")
    return name


def load_profiles() -> None:
    for name, values in PROFILES.items():
        settings.register_profile(name, **values)
    settings.load_profile(profile())


def examples(n: int) -> int:
    """A test's own number of examples under `ci`; at most DEV_EXAMPLES under `dev`."""
    return n if profile() == "ci" else min(n, DEV_EXAMPLES)
