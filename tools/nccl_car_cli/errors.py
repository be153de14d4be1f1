"""Exit codes scripts can rely on, and the errors that carry them up to main()."""

EXIT_OK = 0
EXIT_FAILED = 1        # the check failed, a run failed, or a result was wrong
EXIT_USAGE = 2         # bad options (argparse also exits with 2)
EXIT_MISSING = 3       # a prerequisite is missing: the library, the benchmark program, GPUs


class CliError(Exception):
    exit_code = EXIT_FAILED


class UsageError(CliError):
    exit_code = EXIT_USAGE


class MissingPrerequisite(CliError):
    exit_code = EXIT_MISSING
