"""Put first on PYTHONPATH by `nsyswrap launch`: tell the rank wrapper that Python started,
annotate the program (with --annotate), then run the sitecustomize that this one hides."""

import importlib.machinery
import importlib.util
import os
import sys


def _run_hidden_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get(
    "NSYSWRAP_STARTED"
):  # the rank wrapper learns that the program started, and its pid
    try:
        with open(os.environ["NSYSWRAP_STARTED"], "x") as started:  # the first Python process only
            started.write(str(os.getpid()))
    except OSError:
        pass
try:
    from nsyswrap.annotate.auto import install_from_env
except ImportError as exc:
    print(
        f"nsyswrap: automatic annotation is off: nsyswrap is not importable by {sys.executable} "
        f"({exc})",
        file=sys.stderr,
    )
else:
    install_from_env()
_run_hidden_sitecustomize()
