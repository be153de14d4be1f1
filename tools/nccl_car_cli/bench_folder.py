"""--save DIR and --from DIR: every run's raw stdout and stderr as <config>.<repeat>.out and
.err, in one folder per dtype and op (per dtype, op and mode for all_reduce_perf), and
bench.json saying what was run: the driver, the options that shape the table, and per run its
files, command, the variables its configuration set and how it ended. bench.json is rewritten
after every run, so an interrupted bench still leaves a folder that --from can read. Folders
of format 1, from before bench had --ops, are read as sums."""

import json
import os

from .bench_configs import by_name
from .bench_plan import Job
from .bench_runs import RunRecord
from .bench_types import DEFAULT_OP
from .errors import UsageError

MANIFEST = "bench.json"
FORMAT = 2
# What the report reads from the header (the rest is for people), per format: 1 had no ops.
HEADER_KEYS = {1: ("driver", "configs", "dtypes", "modes", "repeats", "place", "runs"),
               2: ("driver", "configs", "dtypes", "ops", "modes", "repeats", "place", "runs")}


class SavedRuns:
    def __init__(self, folder, header):
        self.folder = folder
        self.header = dict(header, format=FORMAT)
        self.entries = []
        os.makedirs(folder, exist_ok=True)

    def add(self, record):
        files = {"stdout": record.job.stem + ".out", "stderr": record.job.stem + ".err"}
        os.makedirs(os.path.join(self.folder, os.path.dirname(record.job.stem)), exist_ok=True)
        for stream, name in files.items():
            with open(os.path.join(self.folder, name), "w") as out:
                out.write(getattr(record, stream))
        job = record.job
        self.entries.append(dict(files, config=job.config.name, dtype=job.dtype, op=job.op, mode=job.mode,
                                 repeat=job.repeat + 1, command=record.command, variables=record.changes,
                                 failure=record.failure, seconds=round(record.seconds, 3)))
        # Written aside, then renamed: a reader never sees half a file.
        path = os.path.join(self.folder, MANIFEST)
        with open(path + ".new", "w") as out:
            json.dump(dict(self.header, runs=self.entries), out, indent=1)
            out.write("\n")
        os.replace(path + ".new", path)


def _read(folder, name):
    try:
        with open(os.path.join(folder, name), errors="replace") as stream:
            return stream.read(), None
    except OSError as error:
        return "", f"saved output unreadable ({error.strerror}: {name})"


def load(folder):
    """(header, [RunRecord]) from a folder that --save wrote."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path) as stream:
            manifest = json.load(stream)
        if not isinstance(manifest, dict):
            raise TypeError("not a JSON object")
        version = manifest.get("format")
        if version not in HEADER_KEYS:
            raise UsageError(f"{path} is in format {version}, this bench reads "
                             f"{' and '.join(map(str, HEADER_KEYS))}")
        missing = [key for key in HEADER_KEYS[version] if key not in manifest]
        if missing:
            raise KeyError(", ".join(missing))
        if version == 1:   # every run was a sum
            manifest["ops"] = [DEFAULT_OP]
        for name in manifest["configs"]:
            by_name(name)   # a configuration this bench does not know: ValueError
        records = []
        for entry in manifest["runs"]:
            op = DEFAULT_OP if version == 1 else entry["op"]
            job = Job(by_name(entry["config"]), entry["dtype"], op, entry["mode"], entry["repeat"] - 1)
            stdout, stdout_problem = _read(folder, entry["stdout"])
            stderr, stderr_problem = _read(folder, entry["stderr"])
            failures = [f for f in (entry["failure"], stdout_problem, stderr_problem) if f]
            records.append(RunRecord(job, entry["command"], entry["variables"], stdout, stderr,
                                     "; ".join(failures) or None, entry["seconds"]))
    except OSError as error:
        raise UsageError(f"cannot read {path} ({error.strerror}): not a folder written by "
                         "nccl-car bench --save") from None
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path} is not what nccl-car bench --save writes ({error!r})") from None
    return manifest, records
