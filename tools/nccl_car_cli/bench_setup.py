"""What nccl-car bench needs before it runs: the driver (our program or all_reduce_perf),
the library and the GPUs, checked in the order a user would fix them."""

import os
import shutil

from . import driver_all_reduce_perf, driver_car_nccl_bench, gpu_probe, paths
from .bench_options import nccl_tests_options
from .driver_all_reduce_perf import AllReducePerf
from .driver_car_nccl_bench import CarNcclBench
from .errors import MissingPrerequisite, UsageError

MISSING_DRIVER = """\
no benchmark program: no car_nccl_bench at {program} (scripts/build.sh builds it there
when CMake finds NCCL's library) and no all_reduce_perf on PATH. Pass
--car-nccl-bench PATH, or build nccl-tests (it is not part of this repository):
  git clone https://github.com/NVIDIA/nccl-tests
  make -C nccl-tests MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=<folder with include/nccl.h and lib/>
and pass --all-reduce-perf nccl-tests/build/all_reduce_perf (for --launcher mpirun, build with
MPI=1 MPI_HOME=<your MPI>)."""


def _executable(path, option):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingPrerequisite(f"{option}: no executable at {path}")
    return os.path.abspath(path)


def _choose_driver(args, library):
    """(driver name, program path): the option given; else our program when it exists and
    no all_reduce_perf-only option was given; else all_reduce_perf on PATH."""
    if args.all_reduce_perf:
        return driver_all_reduce_perf.NAME, _executable(args.all_reduce_perf, "--all-reduce-perf")
    if args.car_nccl_bench:
        return driver_car_nccl_bench.NAME, _executable(args.car_nccl_bench, "--car-nccl-bench")
    program = driver_car_nccl_bench.default_program(library)
    if os.path.isfile(program) and os.access(program, os.X_OK) and not nccl_tests_options(args):
        return driver_car_nccl_bench.NAME, program
    found = shutil.which("all_reduce_perf")
    if found is None:
        raise MissingPrerequisite(MISSING_DRIVER.format(program=program))
    return driver_all_reduce_perf.NAME, found


def prerequisites(args):
    """(driver, library); fills in args.gpus. What is missing, in the order a user would
    fix it."""
    library, source = paths.library_location(args.lib, os.environ)
    driver_name, program = _choose_driver(args, library)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if driver_name == driver_car_nccl_bench.NAME:
        if args.gpus is None:
            args.gpus = gpu_probe.visible_gpu_count()
            if args.gpus < 2:
                raise MissingPrerequisite(f"car_nccl_bench needs 2 or more GPUs; {args.gpus} visible "
                                          "(see nccl-car doctor)")
        elif args.gpus < 2:
            raise UsageError(f"car_nccl_bench needs 2 or more GPUs: --gpus {args.gpus}")
        driver = CarNcclBench(program, args.gpus, args.min_bytes, args.max_bytes, args.extra_args)
        return driver, library
    if args.launcher:
        if shutil.which(args.launcher[0]) is None:
            raise MissingPrerequisite(f"launcher not found: {args.launcher[0]}")
    elif args.gpus is None:
        args.gpus = gpu_probe.visible_gpu_count()
        if args.gpus == 0:
            raise MissingPrerequisite("no GPU visible (see nccl-car doctor); pass --gpus N "
                                      "or --launcher to run anyway")
    launcher_preload = paths.preload_without(os.environ.get("LD_PRELOAD"), library)
    driver = AllReducePerf(program, args.gpus, args.launcher, args.min_bytes, args.max_bytes,
                           args.graph_iters or 10, args.extra_args, launcher_preload)
    return driver, library
