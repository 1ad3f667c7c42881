"""NVTX annotation helpers for PyTorch training (need torch and the nvtx package).

Importing this package imports neither; each helper imports them when first used.
"""
