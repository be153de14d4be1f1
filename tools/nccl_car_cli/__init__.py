"""The nccl-car command-line tool: one module per command (main.SUBCOMMANDS; `nccl-car --help`
and docs/cli.md list them)."""
