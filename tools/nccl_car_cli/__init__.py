"""The nccl-car command-line tool: doctor, run and bench (see docs/cli.md)."""
