"""The tool's commands, as `nccl-car --help` and the docs list them, are the ones it has
(tools/nccl_car_cli/main.py, SUBCOMMANDS): docs/cli.md's synopsis and one section per
command, and every other place that lists them, name each command and no other."""

import os
import re
import unittest

import cli_support
from nccl_car_cli import main

ROOT = cli_support.REPO_ROOT
COMMANDS = list(main.SUBCOMMANDS)


def read(*path):
    with open(os.path.join(ROOT, *path)) as text:
        return text.read()


def synopsis(cli_md):
    """The commands of the first fenced block of docs/cli.md, in order."""
    block = cli_md.split("```", 2)[1]
    return re.findall(r"^nccl-car (\w+)", block, re.MULTILINE)


def sections(cli_md):
    return re.findall(r"^## `nccl-car (\w+)`", cli_md, re.MULTILINE)


def help_commands(help_text):
    """The commands `nccl-car --help` lists under its positional arguments."""
    listed = help_text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    return re.findall(r"^    (\w+) ", listed, re.MULTILINE)


_NAME = "`(?:" + "|".join(COMMANDS) + ")`"
# Commands as `code`, one after the other: "`a`, `b` and `c`", "`a`, `b`, `c`" (lines may wrap).
_LIST = re.compile(_NAME + r"(?:(?:,\s*|,?\s+(?:and|or)\s+)" + _NAME + ")+")


def incomplete_lists(text):
    """Lists of three or more commands that leave one out (a list gone stale); two named
    together may be a statement about those two."""
    stale = []
    for found in _LIST.finditer(text):
        named = set(re.findall(r"`(\w+)`", found.group(0)))
        if len(named) >= 3 and named != set(COMMANDS):
            stale.append(" ".join(found.group(0).split()))
    return stale


class CommandsInTheDocs(unittest.TestCase):
    def test_help_lists_every_command(self):
        result = cli_support.run_tool("--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(help_commands(result.stdout), COMMANDS)

    def test_cli_md_lists_every_command(self):
        cli_md = read("docs", "cli.md")
        self.assertEqual(synopsis(cli_md), COMMANDS)
        self.assertEqual(sections(cli_md), COMMANDS)

    def test_other_lists_are_whole(self):
        for path in (("README.md",), ("docs", "user-guide.md"), ("docs", "cli.md"), ("tests", "README.md")):
            with self.subTest(path=os.path.join(*path)):
                self.assertEqual(incomplete_lists(read(*path)), [])
        # The tool's own docstrings name no command list to keep up to date.
        for path in (("tools", "nccl-car"), ("tools", "nccl_car_cli", "__init__.py")):
            with self.subTest(path=os.path.join(*path)):
                self.assertNotIn("doctor", read(*path))

    def test_the_readers_see_a_missing_command(self):
        """The comparisons above can fail."""
        self.assertEqual(synopsis("x\n```\nnccl-car doctor [--json]\nnccl-car run -- X\n```\n"), ["doctor", "run"])
        self.assertEqual(sections("## `nccl-car doctor`\n### `nccl-car x`\n## `nccl-car run`\n"), ["doctor", "run"])
        self.assertEqual(help_commands("positional arguments:\n  SUBCOMMAND\n    doctor    what\n"
                                       "    run       runs\n              more\n\noptions:\n"), ["doctor", "run"])
        self.assertEqual(incomplete_lists("the tool (`doctor`, `run`, `bench`)"), ["`doctor`, `run`, `bench`"])
        self.assertEqual(incomplete_lists("tests: `doctor`, `run` and\n`bench` end to end"),
                         ["`doctor`, `run` and `bench`"])
        self.assertEqual(incomplete_lists("`run` and `bench` take `--lib`; `doctor`, `run`, `dropin`, `bench` and `tune`"),
                         [])


if __name__ == "__main__":
    unittest.main()
