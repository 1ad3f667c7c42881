"""The always-on sampler: cheap timings of every Nth step on every rank, and their report.

In the training process: `nsyswrap.sampler(out_dir, every=10)` (nsyswrap.sample.sampler)
times each sampled step, its phases (`nsyswrap.phase`) and its collectives, with CUDA
events when the step runs on a GPU and host timers otherwise, and writes one JSONL file
per rank (schema: nsyswrap.sample.schema). Afterwards `nsyswrap report DIR` reads those
files (nsyswrap.sample.read) and answers with the cross-rank modules of the nsys path
(nsyswrap.sample.objects; the section: nsyswrap.report.samples). Importing this package
imports neither torch nor pandas.
"""
