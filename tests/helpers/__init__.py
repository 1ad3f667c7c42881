"""Helpers shared by the test modules (on the path through pytest's `pythonpath`): test
modules import these, never each other."""
