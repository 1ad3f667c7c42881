"""NVTX ranges in the `nsyswrap` domain, through the `nvtx` package (imported on first use).

`nvtx_calls()` gives `attributes(text)` (build once, reuse for texts that repeat), `push`/`pop`
(nested ranges on the calling thread), `start`/`end` (ranges that may end on another thread)
and `mark(text)` (an instant).
"""

from __future__ import annotations

import functools

from nsyswrap.errors import NsysWrapError

DOMAIN = "nsyswrap"


class _Nvtx:
    """The four NVTX calls of one domain, bound to whichever `nvtx` release is installed."""

    def __init__(self):
        try:
            import nvtx
        except ImportError:
            raise NsysWrapError(
                "nsyswrap.annotate",
                "the nvtx package is not installed",
                "pip install 'nsyswrap[torch]' (or nvtx)",
            ) from None
        self.mark = lambda text: nvtx.mark(message=text, domain=DOMAIN)  # public in every release
        if hasattr(nvtx, "get_domain"):  # nvtx >= 0.2.11: a public Domain object
            domain = nvtx.get_domain(DOMAIN)
            self.attributes = lambda text: domain.get_event_attributes(message=text)
            self.push, self.pop = domain.push_range, domain.pop_range
            self.start, self.end = domain.start_range, domain.end_range
        elif nvtx.enabled():  # nvtx 0.2.10 keeps the same calls in nvtx._lib
            from nvtx._lib import (
                Domain,
                EventAttributes,
                RegisteredString,
                end_range,
                pop_range,
                push_range,
                start_range,
            )

            handle = Domain(DOMAIN).handle
            # RegisteredString(...) would keep every text forever in a class-level cache; collective
            # and step texts never repeat, so build the instance without it (type.__call__).
            self.attributes = lambda text: EventAttributes(
                type.__call__(RegisteredString, handle, text), None, None, None
            )
            self.push = lambda attributes: push_range(attributes, handle)
            self.pop = functools.partial(pop_range, handle)
            self.start = lambda attributes: start_range(attributes, handle)
            self.end = end_range
        else:  # NVTX_DISABLE is set
            self.attributes = str
            self.push = self.start = self.end = self.mark = lambda _: None
            self.pop = lambda: None


@functools.lru_cache(maxsize=1)
def nvtx_calls() -> _Nvtx:
    """The bound NVTX calls; raises NsysWrapError when the nvtx package is missing."""
    return _Nvtx()
