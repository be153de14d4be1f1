"""Stands in for nccl_car_query in the tune and bench tests: `fingerprint` needs a GPU, so it
answers with $FAKE_FINGERPRINT (16 hexadecimal digits) and records the NCCL version it was
asked for in $FAKE_QUERY_LOG; with $FAKE_EXTRA_KERNEL, `policy` is the library's answer with
one more all-reduce kernel of that name, as a library with one more row in its table of
kernels would give it; every other command is this build's query program ($FAKE_QUERY_REAL),
so the tables tune writes are read by the library's own parser."""

import json
import os
import subprocess
import sys


def _policy_with(extra):
    answer = json.loads(subprocess.run([os.environ["FAKE_QUERY_REAL"], "policy"], check=True, capture_output=True,
                                       text=True).stdout)
    answer["algorithms"].append(extra)
    answer["kernels"].append({"name": extra, "collective": "all-reduce", "family": "push", "copies_bits": False})
    print(json.dumps(answer))
    return 0


def main():
    args = sys.argv[1:]
    if args == ["policy"] and os.environ.get("FAKE_EXTRA_KERNEL"):
        return _policy_with(os.environ["FAKE_EXTRA_KERNEL"])
    if args[:1] != ["fingerprint"]:
        os.execv(os.environ["FAKE_QUERY_REAL"], [os.environ["FAKE_QUERY_REAL"], *args])
    with open(os.environ["FAKE_QUERY_LOG"], "a") as log:
        log.write(json.dumps(args) + "\n")
    fingerprint = os.environ["FAKE_FINGERPRINT"]
    cache = os.environ.get("XDG_CACHE_HOME", "")
    print(json.dumps({"description": "a fake machine", "fingerprint": fingerprint,
                      "default_path": os.path.join(cache, "nccl-car", fingerprint + ".table") if cache else ""}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
