"""The settings tables of README.md and docs/user-guide.md are the library's own table
(plugin/settings_table.cc, as the query program prints it), row for row and cell for cell:
a variable added, renamed or changed in one place and not the other fails here."""

import os
import unittest

import cli_support

HEADER = "| variable | values | default | across ranks | meaning |"
DOCUMENTS = ("README.md", os.path.join("docs", "user-guide.md"))


def _cell(text):
    # Markdown decoration only: `code` and *emphasis* say nothing the library says.
    return text.replace("`", "").replace("*", "").strip()


def settings_table(path):
    """The rows of the one table under HEADER in `path`, as lists of plain cells."""
    with open(path) as document:
        lines = document.read().splitlines()
    if lines.count(HEADER) != 1:
        raise AssertionError(f"{path}: expected one table headed {HEADER!r}, found {lines.count(HEADER)}")
    rows = []
    for line in lines[lines.index(HEADER) + 2:]:
        if not line.startswith("|"):
            break
        rows.append([_cell(cell) for cell in line.strip().strip("|").split(" | ")])
    return rows


class SettingsDocsTest(unittest.TestCase):
    def test_tables_match_the_library(self):
        query = cli_support.query_program(self)
        library = [[row["name"], row["values"], row["default_text"], row["agreement"], row["help"]]
                   for row in query.settings({})["settings"]]
        for document in DOCUMENTS:
            with self.subTest(document=document):
                rows = settings_table(os.path.join(cli_support.REPO_ROOT, document))
                self.assertEqual([row[0] for row in rows], [row[0] for row in library],
                                 "the variables, in the library's order")
                for row, expected in zip(rows, library):
                    self.assertEqual(row, expected, f"{document}: the row of {expected[0]}")

    def test_the_reader_rejects_a_drifted_row(self):
        rows = settings_table(os.path.join(cli_support.REPO_ROOT, "README.md"))
        self.assertEqual(rows[0][:3], ["NCCL_CAR_DISABLE", "1, true, yes, on / 0, false, no, off (any case)", "0"])
        self.assertEqual(_cell("`8388608`"), "8388608")
        self.assertEqual(_cell(" *checked* "), "checked")


if __name__ == "__main__":
    unittest.main()
