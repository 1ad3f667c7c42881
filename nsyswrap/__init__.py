"""nsyswrap: where does the step time of multi-GPU training go?"""
from nsyswrap.api import query, sql
from nsyswrap.errors import NsysWrapError
from nsyswrap.run import Opener, Run, open_run

__all__ = ["NsysWrapError", "Opener", "Run", "open_run", "query", "sql"]
