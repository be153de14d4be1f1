#!/usr/bin/env python3
"""Start-up costs of the library (docs/benchmarks.md, "Start-up"), on a GPU machine:

1. car_kernel_load_bench, in a fresh process each time: loading every kernel of ours into
   the context (what the first communicator of a process on a GPU pays) and the GPU memory it
   takes; then resolving one world size's functions (what every communicator pays).
2. car_startup_bench, one process per rank, with and without the library preloaded, in
   alternation: ncclCommInitRank, the first all-reduce after it, a communicator split from it
   and its first all-reduce. On the one-GPU rig (all ranks on GPU 0, under MPS: docs/design.md,
   "Testing without a multi-GPU machine") for each --ranks; on a machine with 2 or more GPUs
   also one process per GPU, on 2 and on all of them (at most 8).
3. With --groups, car_startup_bench --groups the same way: the world and a split for every
   pair of ranks (PyTorch's many process groups), with and without the library: the time of
   all splits, of the pairs' first all-reduces, and the GPU memory after them (the user
   guide's "Many process groups").

Prints one table per part, medians over --repeats runs of the slowest rank of each run.

    run_startup_bench.py [--build BUILD] [--ranks 2,8] [--repeats 5] [--groups]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2e_runner import environments  # noqa: E402  (needs the path above)
from e2e_runner.launch import Launch, run_together  # noqa: E402
from e2e_runner.machine import Machine  # noqa: E402

MPS_SCRIPT = os.path.join(HERE, "..", "e2e", "mps.sh")
FIELD = re.compile(r"(\w+)=([-\w.]+)")
STEPS = ("init_ms", "first_ms", "split_ms", "split_first_ms")
GROUP_STEPS = ("splits_ms", "firsts_ms")


def mps(action, env):
    subprocess.run(["bash", MPS_SCRIPT, action], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fields(line):
    return {name: value for name, value in FIELD.findall(line)}


def nccl_lib_dir(machine, build):
    """Where the real libnccl.so.2 is: the e2e runner's answer, else the build's own NCCL."""
    if machine.nccl_lib_dir:
        return machine.nccl_lib_dir
    with open(os.path.join(build, "CMakeCache.txt")) as cache:
        for line in cache:
            if line.startswith("NCCL_LIBRARY:"):
                return os.path.dirname(os.path.realpath(line.split("=", 1)[1].strip()))
    return None


def kernel_load(build, env, repeats):
    program = os.path.join(build, "tests", "car_kernel_load_bench")
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(repeats):
            log = os.path.join(folder, f"load-{index}.log")
            finished = run_together([Launch([program], env, log, 120)])[0]
            lines = [line for line in finished.text.splitlines() if line.startswith("kernel_load ")]
            if finished.returncode != 0 or not lines:
                raise SystemExit(f"{program} exited {finished.returncode}:\n{finished.text}")
            runs.append(fields(lines[0]))
    print(f"\nLoading our kernels into a fresh process ({runs[0]['sm']}, {runs[0]['loading']} module loading), "
          f"median of {repeats}\n")
    print("| every kernel, ms | GPU memory it took, MiB | one world size's functions, ms |")
    print("| --- | --- | --- |")
    print("| " + " | ".join(f"{statistics.median(float(run[key]) for run in runs):.2f}"
                            for key in ("load_ms", "used_mib", "table_ms")) + " |")


def communicator_runs(build, ranks, env_of, repeats, rig_env=None, groups=False):
    """{False: [per-run {step: slowest rank}], True: [...]}: without and with the library;
    the groups' steps with `groups`."""
    program = os.path.join(build, "tests", "car_startup_bench")
    prefix, steps = ("groups ", GROUP_STEPS) if groups else ("startup ", STEPS)
    results = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(repeats):
            for with_library in (False, True):
                if rig_env is not None:  # a fresh MPS server for every run, as the e2e runs do
                    mps("restart", rig_env)
                id_file = os.path.join(folder, f"id-{index}-{int(with_library)}")
                device = "0" if rig_env is not None else str(rank)
                launches = [Launch([program, str(rank), str(ranks), id_file, device] + (["--groups"] if groups else []),
                                   env_of(rank, with_library), os.path.join(folder, f"{index}-{int(with_library)}-r{rank}"),
                                   300) for rank in range(ranks)]
                finished = run_together(launches)
                lines = [fields(line) for run in finished for line in run.text.splitlines()
                         if line.startswith(prefix)]
                if any(run.returncode != 0 for run in finished) or len(lines) != ranks:
                    texts = "\n".join(run.text[-2000:] for run in finished)
                    raise SystemExit(f"car_startup_bench, {ranks} ranks, library {with_library}: failed\n{texts}")
                run = {step: max(float(line[step]) for line in lines) for step in steps}
                run["used_mib"] = max(float(line["used_mib"]) for line in lines)
                if groups:
                    run["communicators"] = int(lines[0]["communicators"])
                results[with_library].append(run)
    return results


def print_communicators(title, rows):
    print(f"\n{title}\n")
    print("| ranks | library | init, ms | first all-reduce, ms | split, ms | its first all-reduce, ms | GPU memory, MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for ranks, results in rows:
        for with_library in (False, True):
            runs = results[with_library]
            cells = [f"{statistics.median(run[step] for run in runs):.1f}" for step in STEPS + ("used_mib",)]
            print(f"| {ranks} | {'yes' if with_library else 'no'} | " + " | ".join(cells) + " |")
        added = [statistics.median(run[step] for run in results[True]) -
                 statistics.median(run[step] for run in results[False]) for step in STEPS]
        print(f"| {ranks} | added | " + " | ".join(f"{value:+.1f}" for value in added) + " | |")


def print_groups(title, rows):
    print(f"\n{title}\n")
    print("| ranks | communicators | library | all splits, ms | per split, ms | pairs' first all-reduces, ms | "
          "GPU memory, MiB | per communicator, MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for ranks, results in rows:
        for with_library in (False, True):
            runs = results[with_library]
            communicators = runs[0]["communicators"]
            splits, firsts, used = (statistics.median(run[key] for run in runs)
                                    for key in GROUP_STEPS + ("used_mib",))
            print(f"| {ranks} | {communicators} | {'yes' if with_library else 'no'} | {splits:.1f} | "
                  f"{splits / (communicators - 1):.2f} | {firsts:.1f} | {used:.0f} | {used / communicators:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--ranks", default="2,8", help="world sizes on the one-GPU rig (default 2,8)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--groups", action="store_true",
                        help="also the world and every pair (many process groups), on the rig")
    args = parser.parse_args(argv)
    build = os.path.abspath(args.build)
    library = os.path.join(build, "shim", "libnccl-car.so")
    machine = Machine()
    if machine.gpus == 0:
        print("run_startup_bench: no GPU here")
        return 77
    nccl = nccl_lib_dir(machine, build)
    kernel_load(build, environments.gpu_machine(machine.env, nccl), args.repeats)

    rig_env = environments.rig(machine.env, nccl)
    multiprocessors = machine.multiprocessors  # asked before MPS starts

    def rig_rank(ranks):
        def env_of(rank, with_library):
            env = dict(rig_env, NCCL_HOSTID=f"startup-rank-{rank}")
            if with_library:
                env = environments.with_library(env, library,
                                                NCCL_CAR_MAX_BLOCKS=environments.rig_blocks(multiprocessors, ranks))
            return env
        return env_of

    rows, group_rows = [], []
    mps("start", rig_env)
    try:
        for ranks in (int(value) for value in args.ranks.split(",")):
            rows.append((ranks, communicator_runs(build, ranks, rig_rank(ranks), args.repeats, rig_env)))
            if args.groups:
                group_rows.append((ranks, communicator_runs(build, ranks, rig_rank(ranks), args.repeats, rig_env,
                                                            groups=True)))
    finally:
        mps("stop", rig_env)
    print_communicators(f"A communicator's set-up on the one-GPU rig (processes under MPS, NCCL over sockets), "
                        f"median of {args.repeats}, slowest rank", rows)
    if group_rows:
        print_groups(f"The world and every pair on the one-GPU rig (GPU memory of the whole GPU), median of "
                     f"{args.repeats}, slowest rank", group_rows)

    if machine.gpus >= 2:
        gpu_env = environments.gpu_machine(machine.env, nccl)

        def gpu_rank(rank, with_library):
            return environments.with_library(gpu_env, library) if with_library else dict(gpu_env)
        sizes = sorted({2, min(machine.gpus, 8)})
        rows = [(ranks, communicator_runs(build, ranks, gpu_rank, args.repeats)) for ranks in sizes]
        print_communicators(f"A communicator's set-up, one process per GPU, median of {args.repeats}, slowest rank", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
