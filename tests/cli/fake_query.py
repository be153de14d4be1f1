"""Stands in for nccl_car_query in the tune tests: `fingerprint` needs a GPU, so it answers
with $FAKE_FINGERPRINT (16 hexadecimal digits) and records the NCCL version it was asked
for in $FAKE_QUERY_LOG; every other command is this build's query program ($FAKE_QUERY_REAL),
so the tables tune writes are read by the library's own parser."""

import json
import os
import sys


def main():
    args = sys.argv[1:]
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
