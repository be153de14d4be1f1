"""Stands in for car_nccl_bench and all_reduce_perf in the bench tests (no GPU needed).

    python3 fake_bench_program.py car_nccl_bench|all_reduce_perf ARGS...

It tells which configuration it runs as from its arguments and environment, as the real
programs would differ: --symmetric or -R 2, NCCL_GRAPH_MIXING_SUPPORT=0, libnccl-car.so in
LD_PRELOAD, NCCL_CAR_PDL=0 or NCCL_CAR_ALGO. Every run appends what it saw, as one JSON line,
to $FAKE_BENCH_LOG. It prints canned times from $FAKE_BENCH_CONFIG, a JSON object:
    "times": {config: [[fixed, per_kib], ...]}   eager microseconds at size S are
              fixed + per_kib * S / 1024, one pair per repeat (cycled); graph is half that
    "host": {config: us}        host time per call (car_nccl_bench), default 2
    "offset": {name: us}        added to the fixed time of the runs of an op or dtype (as the program
                                got it), or of one configuration's: "car prod"; tells the tables
                                of several dtypes and ops apart
    "unknown": [name]           all_reduce_perf: a type or op this build lacks; it says so and
                                measures float (sum) instead, as nccl-tests does
    "wrong": {config: bytes}    the result at this size is wrong
    "exit": {config: status}    exit with this status after printing
    "sleep": {config: seconds}  sleep first
    "nothing": [config]         print no result, as car_nccl_bench does on one GPU, and exit 0
    "silent": [config]          a run with the library that prints no library line
    "leaky": [config]           a run without the library that prints library lines"""

import json
import os
import sys
import time

LIBRARY_LINES = ("node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 setup: eligible (ipc peers, full nvlink, "
                 "sm_90, up to 8388608 bytes)\n"
                 "node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 released: taken 1shot=3 2shot=0 1stage=1 "
                 "2stage=0 (4096 bytes) forwarded 2 (too-large=2)\n")
# all_reduce_perf's -d names, then car_nccl_bench's --type names (it refuses others).
TESTS_TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2,
                    "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
LIBRARY_TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "fp16": 2,
                      "bf16": 2, "fp32": 4, "fp64": 8, "fp8e4m3": 1, "fp8e5m2": 1}
OPS = ("sum", "prod", "min", "max", "avg")


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def configuration(role, args):
    env = os.environ
    if "libnccl-car.so" in env.get("LD_PRELOAD", ""):
        if env.get("NCCL_CAR_PDL") == "0":
            return "car-pdl0"
        return "car-" + env["NCCL_CAR_ALGO"] if env.get("NCCL_CAR_ALGO") else "car"
    symmetric = "--symmetric" in args if role == "car_nccl_bench" else option(args, "-R") == "2"
    return "nccl" + ("-R2" if symmetric else "") + ("-gm0" if env.get("NCCL_GRAPH_MIXING_SUPPORT") == "0" else "")


def record(role, config, args, dtype, op, mode):
    log = os.environ["FAKE_BENCH_LOG"]
    earlier = []
    if os.path.exists(log):
        with open(log) as stream:
            earlier = [json.loads(line) for line in stream]
    seen = {"role": role, "config": config, "args": args, "dtype": dtype, "op": op, "mode": mode,
            "env": {name: os.environ.get(name) for name in
                    ("LD_PRELOAD", "NCCL_CAR_DEBUG", "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_CAR_PDL", "NCCL_CAR_ALGO",
                     "NCCL_CAR_MAX_BYTES")}}
    with open(log, "a") as stream:
        stream.write(json.dumps(seen) + "\n")
    return sum(1 for run in earlier
               if (run["config"], run["dtype"], run["op"], run["mode"]) == (config, dtype, op, mode))


def sizes(low, high, element_bytes):
    """Doubling from low to high, each rounded down to whole elements, as both programs do."""
    size = low
    while size <= high:
        if size >= element_bytes:
            yield size // element_bytes * element_bytes
        size *= 2


def car_nccl_bench(canned, config, args, eager_us):
    wrong_at = canned.get("wrong", {}).get(config)
    print(f"# car_nccl_bench: {option(args, '--gpus')} GPUs, one process each (fake)")
    print("bytes,eager_us,graph_us,host_us")
    element_bytes = LIBRARY_TYPE_BYTES[option(args, "--type")]
    for size in sizes(int(option(args, "--min-bytes")), int(option(args, "--max-bytes")), element_bytes):
        if size == wrong_at:
            print(f"# wrong: {size} bytes, 3 element(s) differ on the worst rank")
            return 2
        print(f"{size},{eager_us(size):.2f},{eager_us(size) / 2:.2f},{canned.get('host', {}).get(config, 2.0):.2f}")
    return 0


def all_reduce_perf(canned, config, args, eager_us):
    wrong_at = canned.get("wrong", {}).get(config)
    graph = option(args, "-G") != "0"
    dtype, op = option(args, "-d"), option(args, "-o")
    if dtype in canned.get("unknown", []):
        print(f"invalid type {dtype}, defaulting to float .. ")
        dtype = "float"
    if op in canned.get("unknown", []):
        print(f"invalid op {op}, defaulting to sum .. ")
        op = "sum"
    print(f"# nThread 1 nGpus {option(args, '-g')} minBytes {option(args, '-b')} maxBytes {option(args, '-e')}")
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
    for size in sizes(int(option(args, "-b")), int(option(args, "-e")), TESTS_TYPE_BYTES[dtype]):
        t = eager_us(size) / (2 if graph else 1)
        wrong = 3 if size == wrong_at else 0
        print(f"{size:>12} {size // TESTS_TYPE_BYTES[dtype]:>13} {dtype:>9} {op:>7}      -1 {t:8.2f}    0.10    0.20 "
              f"{wrong:>6} {1000 * t:8.2f}    0.10    0.20 {wrong:>6}")
    print("# Out of bounds values : 0 OK")
    return 0


def main():
    role, args = sys.argv[1], sys.argv[2:]
    with open(os.environ["FAKE_BENCH_CONFIG"]) as stream:
        canned = json.load(stream)
    config = configuration(role, args)
    if role == "car_nccl_bench":
        dtype, op, mode = option(args, "--type"), option(args, "--op", "sum"), None
        if dtype not in LIBRARY_TYPE_BYTES or op not in OPS:
            print(f"car_nccl_bench: unknown --type {dtype} or --op {op}", file=sys.stderr)
            return 2
    else:
        dtype, op, mode = option(args, "-d"), option(args, "-o", "sum"), option(args, "-G")
    repeat = record(role, config, args, dtype, op, mode)
    time.sleep(canned.get("sleep", {}).get(config, 0))
    if config in canned.get("nothing", []):
        print("car_nccl_bench: needs 2 or more GPUs (found 1); nothing measured")
        return 0
    pairs = canned["times"][config]
    fixed, per_kib = pairs[repeat % len(pairs)]
    fixed += sum(canned.get("offset", {}).get(name, 0)
                 for name in (dtype, op, f"{config} {dtype}", f"{config} {op}"))

    def eager_us(size):
        return fixed + per_kib * size / 1024

    status = (car_nccl_bench if role == "car_nccl_bench" else all_reduce_perf)(canned, config, args, eager_us)
    with_car = config.startswith("car")
    if (with_car and config not in canned.get("silent", [])) or config in canned.get("leaky", []):
        sys.stderr.write(LIBRARY_LINES)
    sys.stdout.flush()
    return canned.get("exit", {}).get(config, status)


if __name__ == "__main__":
    sys.exit(main())
