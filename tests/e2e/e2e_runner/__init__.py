"""The end-to-end runner: starts the runs of the library through the real NCCL on a machine
with GPUs (several ranks as processes on one GPU under MPS, or one process per GPU), reads
their logs with the command-line tool's parsers, and decides pass or fail. Entry point:
tests/e2e/run_e2e.py; what each scenario checks: the scenarios_*.py modules."""
