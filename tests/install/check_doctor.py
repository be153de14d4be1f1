"""Checks `nccl-car doctor --json` of an installed tool (run-install-tests.sh): it must find
the library installed with it, that library's audit module, front and query program, each
at the path given.

    check_doctor.py DOCTOR_JSON LIBRARY AUDIT_MODULE FRONT QUERY_PROGRAM
"""

import json
import sys


def main(report_path, library, audit, front, query):
    with open(report_path) as stream:
        report = json.load(stream)
    found = {
        "library": (report["library"]["path"], report["library"]["source"], report["library"]["exists"]),
        "audit module": (report["routes"]["audit_module"]["path"], report["routes"]["audit_module"]["exists"]),
        "front": (report["routes"]["front"]["path"], report["routes"]["front"]["exists"]),
        "query program": report["settings"]["checked_by"],
    }
    expected = {
        "library": (library, "installed", True),
        "audit module": (audit, True),
        "front": (front, True),
        "query program": query,
    }
    wrong = [f"{name}: {found[name]!r}, expected {expected[name]!r}" for name in expected if found[name] != expected[name]]
    for line in wrong:
        print(f"check_doctor: {line}", file=sys.stderr)
    if not wrong:
        print(f"check_doctor: the installed tool uses {library} and everything beside it")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
