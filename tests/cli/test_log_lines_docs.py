"""Every example log line in the docs is one the library writes.

The lines are checked against `nccl_car_query log-samples`, which makes lines with the
library's own formatter (plugin/log_format.h), counters and settings parser: a change of
format, of a kernel or reason name, or of a WARN's wording fails here until the docs follow.

- README.md and docs/*.md (not the history page, which keeps past runs as they were): every
  line of a fenced block that holds `NCCL-CAR WARN|INFO|TRACE` must be a sample line. It may
  begin with `... ` instead of the host, pid, thread and device, and `<name>` stands for any
  text (a template, such as the line start the user guide explains).
- plugin/log_format.h: every format function's comment shows what it writes as `e.g. "..."`,
  and each such example must be a piece of a sample line."""

import glob
import os
import re
import unittest

import cli_support

ROOT = cli_support.REPO_ROOT
LEVELS = re.compile(r"NCCL-CAR (WARN|INFO|TRACE) ")
HEADER = os.path.join(ROOT, "plugin", "log_format.h")


def documents():
    """README.md and every page of docs/ but the dated history."""
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return [os.path.join(ROOT, "README.md")] + [page for page in pages
                                                  if os.path.basename(page) != "benchmarks-history.md"]


def example_lines(text):
    """(line number, line) of every log line in a fenced block of `text`."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced and LEVELS.search(line):
            found.append((number, line.strip()))
    return found


def pattern(example, whole=True):
    """A regular expression for an example: `... ` at the start for any line start, `<name>`
    for any text, everything else as written."""
    prefix = ""
    if example.startswith("... "):
        prefix, example = r".+ ", example[len("... "):]
    parts = re.split(r"(<[^<>\s][^<>]*>)", example)
    body = "".join(".+" if part.startswith("<") and part.endswith(">") else re.escape(part) for part in parts)
    return re.compile(prefix + body if whole else body)


def header_examples(text):
    """{function: [examples]} for every format function of log_format.h: the `e.g. "..."`
    pieces of the comment right above it (comment lines joined as one text)."""
    lines = text.splitlines()
    examples = {}
    for index, line in enumerate(lines):
        function = re.match(r"inline size_t (format\w+)\(", line)
        if not function:
            continue
        comment = []
        above = index - 1
        while above >= 0 and lines[above].startswith("//"):
            comment.insert(0, lines[above][2:].strip())
            above -= 1
        examples[function.group(1)] = re.findall(r'e\.g\. "([^"]*)"', " ".join(comment))
    return examples


class LogLinesInTheDocs(unittest.TestCase):
    def setUp(self):
        self.samples = [sample["line"] for sample in cli_support.query_program(self).log_samples()]

    def written(self, regex, whole=True):
        return any((regex.fullmatch(line) if whole else regex.search(line)) for line in self.samples)

    def test_every_example_line_is_one_the_library_writes(self):
        seen = {}
        for path in documents():
            with open(path) as document:
                lines = example_lines(document.read())
            seen[os.path.relpath(path, ROOT)] = len(lines)
            for number, line in lines:
                with self.subTest(where=f"{os.path.relpath(path, ROOT)}:{number}"):
                    self.assertTrue(self.written(pattern(line)),
                                    f"not a line the library writes (nccl_car_query log-samples): {line}")
        # The pages that show lines still show them: the test cannot pass by finding none.
        for page in ("README.md", os.path.join("docs", "user-guide.md"), os.path.join("docs", "cli.md")):
            self.assertGreater(seen.get(page, 0), 0, f"{page} shows no example log line any more")

    def test_the_readme_shows_both_summary_lines(self):
        with open(os.path.join(ROOT, "README.md")) as readme:
            lines = [line for _number, line in example_lines(readme.read())]
        self.assertTrue(any(" setup: eligible (" in line for line in lines))
        self.assertTrue(any(" released: taken " in line for line in lines))

    def test_every_format_function_shows_an_example_the_library_writes(self):
        with open(HEADER) as header:
            examples = header_examples(header.read())
        self.assertIn("formatReleased", examples)
        for function, shown in examples.items():
            with self.subTest(function=function):
                self.assertTrue(shown, f"{function}: no e.g. \"...\" in its comment")
                for example in shown:
                    self.assertTrue(self.written(pattern(example, whole=False), whole=False),
                                    f"{function}: not a piece of any sample line: {example}")

    def test_the_reader_rejects_a_drifted_line(self):
        """The checks above can fail: lines the library does not write are refused."""
        released = next(line for line in self.samples if " released: " in line)
        self.assertTrue(self.written(pattern(released)))
        self.assertTrue(self.written(pattern("... " + released[released.index("NCCL-CAR"):])))
        self.assertFalse(self.written(pattern(released.replace(" allgather=", " all-gather="))))
        self.assertFalse(self.written(pattern("... NCCL-CAR INFO comm 0x1 rank 0/2 released: taken 1shot=1 "
                                              "2shot=0 1stage=0 2stage=0 (16 bytes) forwarded 0")))
        self.assertTrue(self.written(pattern("<host>:<pid>:<tid> [<device>] NCCL-CAR INFO <text>")))
        self.assertFalse(self.written(pattern("<host>:<pid>:<tid> [<device>] NCCL INFO <text>")))
        self.assertEqual(example_lines("text\n```\nh:1:2 [0] NCCL-CAR INFO x\n```\nh:1:2 [0] NCCL-CAR INFO y\n"),
                         [(3, "h:1:2 [0] NCCL-CAR INFO x")])
        self.assertEqual(header_examples('// says, e.g. "a b\n// c".\ninline size_t formatX(char* out'),
                         {"formatX": ["a b c"]})


if __name__ == "__main__":
    unittest.main()
