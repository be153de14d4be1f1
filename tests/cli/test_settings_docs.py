"""docs/settings.md is the library's own table of settings (plugin/settings_table.cc, as the
query program prints it), written by scripts/settings-page.py: a variable added, renamed or
changed in the code and not on the page fails here until the script is run again. The
README and the user guide link to the page and keep no copy of the table."""

import difflib
import importlib.util
import os
import unittest

import cli_support

ROOT = cli_support.REPO_ROOT
PAGE = os.path.join(ROOT, "docs", "settings.md")


def _generator():
    spec = importlib.util.spec_from_file_location("settings_page", os.path.join(ROOT, "scripts", "settings-page.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


settings_page = _generator()


class SettingsPage(unittest.TestCase):
    def test_page_is_the_library_table(self):
        cli_support.query_program(self)
        expected = settings_page.page_from(cli_support.QUERY_PROGRAM)
        with open(PAGE) as page:
            actual = page.read()
        if actual != expected:
            diff = "".join(difflib.unified_diff(actual.splitlines(True), expected.splitlines(True),
                                                "docs/settings.md", "from the library"))
            self.fail("docs/settings.md differs from plugin/settings_table.cc: run scripts/settings-page.py\n" + diff)

    def test_every_setting_has_its_row(self):
        query = cli_support.query_program(self)
        with open(PAGE) as page:
            text = page.read()
        for row in query.settings({})["settings"]:
            self.assertIn(f"| `{row['name']}` | {row['values']} | `{row['default_text']}` |", text)

    def test_readme_and_guide_link_to_it_without_a_copy(self):
        for document in ("README.md", os.path.join("docs", "user-guide.md")):
            with self.subTest(document=document), open(os.path.join(ROOT, document)) as text:
                content = text.read()
                self.assertIn("settings.md", content)
                self.assertNotIn(settings_page.HEADER, content)

    def test_a_changed_row_changes_the_page(self):
        """The comparison above can fail: the page follows every cell of the table."""
        row = {"name": "NCCL_CAR_X", "values": "1 to 8", "default_text": "4", "agreement": "checked",
               "help": "a setting"}
        page = settings_page.render({"settings": [row]})
        self.assertIn("| `NCCL_CAR_X` | 1 to 8 | `4` | *checked* | a setting |", page)
        for cell, value in (("values", "1 to 9"), ("default_text", "5"), ("agreement", "may differ"),
                            ("help", "another")):
            self.assertNotEqual(settings_page.render({"settings": [dict(row, **{cell: value})]}), page, cell)


if __name__ == "__main__":
    unittest.main()
