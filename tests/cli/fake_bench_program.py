"""Stands in for car_nccl_bench and all_reduce_perf in the bench tests (no GPU needed).

    python3 fake_bench_program.py car_nccl_bench|all_reduce_perf ARGS...

It tells which configuration it runs as from its arguments and environment, as the real
programs would differ: --symmetric or -R 2, NCCL_GRAPH_MIXING_SUPPORT=0, libnccl-car.so in
LD_PRELOAD, NCCL_CAR_PDL=0 or NCCL_CAR_ALGO. Every run appends what it saw, as one JSON line,
to $FAKE_BENCH_LOG. It prints canned times from $FAKE_BENCH_CONFIG, a JSON object:
    "times": {config: [[fixed, per_kib], ...]}   eager microseconds at size S are
              fixed + per_kib * S / 1024, one pair per repeat (cycled); graph is half that
    "factor": {mode: f}         car_nccl_bench: that row mode's times times f (model-graph, ...)
    "host": {config: us}        host time per call (car_nccl_bench), default 2
    "offset": {name: us}        added to the fixed time of the runs of an op or dtype (as the program
                                got it), or of one configuration's: "car prod"; tells the tables
                                of several dtypes and ops apart
    "unknown": [name]           all_reduce_perf: a type or op this build lacks; it says so and
                                measures float (sum) instead, as nccl-tests does
    "wrong": {config: bytes}    the result at this size is wrong (car_nccl_bench: every row there,
                                then exit 2)
    "unchecked": {config: [mode]}  car_nccl_bench: rows of these modes say no call was checked
    "exit": {config: status}    exit with this status after printing
    "sleep": {config: seconds}  sleep first
    "nothing": [config]         print no result, as car_nccl_bench does without GPUs, and exit 0
    "silent": [config]          a run with the library that prints no library line
    "leaky": [config]           a run without the library that prints library lines
    "takes": {config: bytes}    car_nccl_bench with the library: the largest message its kernel takes
                                (default: every size); with NCCL_CAR_DEBUG=TRACE each call taken
                                prints the library's TRACE line, naming the kernel forced by
                                NCCL_CAR_ALGO, else the collective's own (allgather, reducescatter),
                                else (all-reduce) 1shot; where NCCL_CAR_TABLE names a table file,
                                the kernel its row gives (no row: as without it; "nccl": not taken)
    "ignore_table": true        car_nccl_bench: never reads NCCL_CAR_TABLE
    "links": "pcie"             the library's communicators are the PCIe case (default "nvlink"): its
                                setup: line says so, and with neither NCCL_CAR_ALGO forcing a push
                                kernel nor a table row of the pcie case for its world size it is not
                                eligible (pcie untuned) and takes nothing; with a table row but none
                                for the size, it takes nothing there (untuned)
    "not_eligible": "why"       the library's setup: line says the communicator is not eligible, and
                                it takes nothing
A car_nccl_bench --probe run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=TUNING prints NCCL's
tuning lines: "RING/LL" below 4 KiB, "NVLS/Simple" from there (a symmetric kernel with -R2)."""

import json
import os
import sys
import time

LINKS_TEXT = {"nvlink": "full nvlink", "pcie": "pcie (every pair peer-to-peer, PXB at most)"}
RELEASED_LINE = ("node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 released: taken 1shot=3 2shot=0 1stage=1 "
                 "2stage=0 (4096 bytes) forwarded 2 (too-large=2)\n")


UNTUNED_RELEASED_LINE = ("node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/{ranks} released: taken 1shot=0 2shot=0 "
                         "1stage=0 2stage=0 (0 bytes) forwarded 5 (untuned=5)\n")
PUSH_KERNELS = ("1shot", "2shot")


def pcie_measured(ranks):
    """Whether NCCL_CAR_TABLE's file has a row of the pcie case for `ranks` ranks."""
    path = os.environ.get("NCCL_CAR_TABLE")
    if not path or path == "builtin" or not os.path.exists(path):
        return False
    with open(path) as stream:
        return any(len(words) == 7 and words[1] == str(ranks) and words[2] == "pcie"
                   for words in (line.split() for line in stream))


def library_lines(canned, ranks):
    """The library's setup: and released: lines, as the canned case says."""
    if canned.get("not_eligible"):
        return f"node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 setup: not eligible: {canned['not_eligible']}\n"
    links = canned.get("links", "nvlink")
    name = f"node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/{ranks}"
    forced = os.environ.get("NCCL_CAR_ALGO")
    note = ""
    if links == "pcie" and pcie_measured(ranks):
        note = f"; pcie tuned: the choice table's rows for {ranks} ranks over PCIe decide; sizes they do not cover ..."
    elif links == "pcie" and forced in PUSH_KERNELS:
        note = f"; pcie forced: NCCL_CAR_ALGO={forced} takes the all-reduces it can run; every other call goes ..."
    elif links == "pcie":
        return (f"{name} setup: not eligible: pcie untuned (ipc peers, {LINKS_TEXT[links]}, sm_90): every call goes "
                f"to NCCL (untuned) until `nccl-car tune` has measured {ranks} ranks over PCIe on this machine\n" +
                UNTUNED_RELEASED_LINE.format(ranks=ranks))
    return (f"node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 setup: eligible (ipc peers, {LINKS_TEXT[links]}, "
            f"sm_90, up to 8388608 bytes; holds 50337280 bytes; from call 0){note}\n" + RELEASED_LINE)
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
            "probe": "--probe" in args,
            "env": {name: os.environ.get(name) for name in
                    ("LD_PRELOAD", "NCCL_CAR_DEBUG", "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_CAR_PDL", "NCCL_CAR_ALGO",
                     "NCCL_CAR_MAX_BYTES", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_CAR_NCCL_LIB",
                     "LD_LIBRARY_PATH", "NCCL_CAR_TABLE")}}
    with open(log, "a") as stream:
        stream.write(json.dumps(seen) + "\n")
    return sum(1 for run in earlier
               if (run["config"], run["dtype"], run["op"], run["mode"], run["probe"])
               == (config, dtype, op, mode, seen["probe"]))


def sizes(low, high, element_bytes):
    """Doubling from low to high, each rounded down to whole elements, as both programs do."""
    size = low
    while size <= high:
        if size >= element_bytes:
            yield size // element_bytes * element_bytes
        size *= 2


def row_modes(modes):
    rows = []
    for mode in modes:
        rows += [f"{mode}-graph", f"{mode}-eager"] + (["host"] if mode == "isolated" else [])
    return rows


def tuning_lines(config, size):
    if os.environ.get("NCCL_DEBUG") != "INFO" or os.environ.get("NCCL_DEBUG_SUBSYS") != "TUNING":
        return []
    if "R2" in config and size >= 4096:
        return [f"node:1:2 [0] NCCL INFO AllReduce [Symmetric]: {size} Bytes -> Kernel AllReduce_AGxLL_R "
                "nchannels 2 nthreads 512 nWorks 1"]
    algo = "RING/LL" if size < 4096 else "NVLS/Simple"
    line = f"node:1:2 [0] NCCL INFO AllReduce: {size} Bytes -> Algo {algo.split('/')[0]} proto {algo.split('/')[1]} "
    return [line + "channel{Lo..Hi}={0..1}"] * 2   # one per call: the same choice twice


# The library's type families (plugin/choice_table.h), for the types the tests time.
FAMILIES = {"bf16": "half", "fp16": "half", "fp32": "float", "fp8e4m3": "fp8", "fp8e5m2": "fp8", "int32": "split",
            "int64": "split", "int8": "split", "uint8": "split", "uint32": "split", "uint64": "split", "fp64": "split"}
OWN_KERNEL = {"all-reduce": "1shot", "all-gather": "allgather", "reduce-scatter": "reducescatter"}


def table_winner(collective, ranks, links, dtype, size):
    """The winner NCCL_CAR_TABLE's file gives this message on a communicator of that case,
    None without a row (or file)."""
    path = os.environ.get("NCCL_CAR_TABLE")
    if not path or path == "builtin" or not os.path.exists(path):
        return None
    with open(path) as stream:
        for line in stream:
            words = line.split()
            if len(words) == 7 and words[0] == collective and int(words[1]) == ranks and words[2] == links and \
                    words[3] in (FAMILIES[dtype], "any") and int(words[4]) <= size <= int(words[5]):
                return words[6]
    return None


def trace_lines(canned, config, args, size):
    """The library's TRACE line for the call of `size` (the whole message) it takes."""
    if not config.startswith("car") or os.environ.get("NCCL_CAR_DEBUG") != "TRACE":
        return []
    collective, ranks, dtype = option(args, "--collective", "all-reduce"), int(option(args, "--ranks")), option(args, "--type")
    if size > canned.get("takes", {}).get(config, size) or canned.get("not_eligible"):
        return []
    links = canned.get("links", "nvlink")
    if links == "pcie" and not pcie_measured(ranks) and os.environ.get("NCCL_CAR_ALGO") not in PUSH_KERNELS:
        return []   # not eligible (pcie untuned)
    # Over PCIe the library has no kernel of its own choosing: a row, or NCCL_CAR_ALGO, names it.
    kernel = os.environ.get("NCCL_CAR_ALGO") or (OWN_KERNEL[collective] if links == "nvlink" else None)
    if not canned.get("ignore_table") and not os.environ.get("NCCL_CAR_ALGO"):
        kernel = table_winner(collective, ranks, links, dtype, size) or kernel
    if kernel in ("nccl", None):
        return []
    part = size if collective == "all-reduce" else size // ranks
    op = "" if collective == "all-gather" else " sum"
    return [f"node:1:2 [0] NCCL-CAR TRACE rank 0 {collective} {part // LIBRARY_TYPE_BYTES[dtype]} x {dtype}{op} "
            f"({part} bytes) -> {kernel}"]


def car_nccl_bench(canned, config, args, eager_us):
    wrong_at = canned.get("wrong", {}).get(config)
    unchecked = canned.get("unchecked", {}).get(config, [])
    probe = "--probe" in args
    collective = option(args, "--collective", "all-reduce")
    print(f"# car_nccl_bench: {option(args, '--ranks')} ranks, one process each (fake), NCCL 22809, {collective}")
    print("mode,workload,bytes,us,checked,wrong,samples_us")
    element_bytes = LIBRARY_TYPE_BYTES[option(args, "--type")]
    if collective != "all-reduce":   # whole elements per rank
        element_bytes *= int(option(args, "--ranks"))
    modes = row_modes(option(args, "--modes", "model,isolated").split(","))
    workloads = option(args, "--workloads", "plain").split(",")
    status = 0
    for size in (int(word) // element_bytes * element_bytes for word in option(args, "--sizes").split(",")):
        if size == 0:
            continue
        wrong = 3 if size == wrong_at else 0
        status = 2 if wrong else status
        for line in tuning_lines(config, size):
            print(line)
        for line in trace_lines(canned, config, args, size):
            sys.stderr.write(line + "\n")
        print(f"probe,plain,{size},,1,{wrong},")
        if probe:
            continue
        for workload in workloads:
            for mode in modes:
                if (mode.startswith("chain") and workload == "in-place") or \
                        (workload == "after-large" and not mode.startswith("isolated") and mode != "host"):
                    continue
                if mode == "host":
                    us = canned.get("host", {}).get(config, 2.0)
                else:
                    us = eager_us(size) / (2 if mode.endswith("graph") else 1)
                us *= canned.get("factor", {}).get(mode, 1)
                checked = 0 if mode in unchecked else 15
                print(f"{mode},{workload},{size},{us:.3f},{checked},{wrong if checked else 0},{us:.3f};{us:.3f}")
    return status


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
        print("car_nccl_bench: needs 2 or more GPUs, or --one-gpu (found 1 GPUs); nothing measured")
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
        sys.stderr.write(library_lines(canned, int(option(args, "--ranks", option(args, "-g", "2")))))
    sys.stdout.flush()
    return canned.get("exit", {}).get(config, status)


if __name__ == "__main__":
    sys.exit(main())
