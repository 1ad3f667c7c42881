"""The handle every annotation helper returns: it undoes what the helper installed."""

from __future__ import annotations

from collections.abc import Callable, Iterable


class Annotation:
    """Call `remove()` (or leave a `with` block) to take the annotation off again."""

    def __init__(self, undo: Iterable[Callable[[], object]]):
        self._undo = list(undo)

    def remove(self) -> None:
        """Undo everything, newest first; calling it again does nothing."""
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> Annotation:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
