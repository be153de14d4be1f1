"""PyTorch end to end through libnccl-car.so, one process per rank, all on one GPU.

Run by tests/e2e/run_e2e.py (torch-*) under torchrun with LD_PRELOAD set. Every all-reduce
has an exact expected value (small integers sum exactly in fp16, bf16 and fp32), so any
difference is an error. Phases:
  eager     all_reduce of fp16/bf16/fp32 across the 8 MiB limit, lazy communicator init
  graph     the same inside torch.cuda.graph capture, replayed with fresh inputs
  groups    two process groups at once (new_group -> ncclCommSplit), interleaved
  recreate  destroy_process_group and init again
  device_id eager init with device_id (PyTorch then creates nonblocking communicators)
Prints one PASS/FAIL line per phase and exits 1 if any failed.
"""
import os
import sys

from torch_rank import RANK, WORLD, claim_host_id, device

claim_host_id("torch-e2e")

import torch  # noqa: E402  (after NCCL_HOSTID is set)
import torch.distributed as dist  # noqa: E402

DEVICE = device(torch)
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# Bytes: below, at and above the 8 MiB limit, and one not a multiple of 16.
SIZES = [16, 4096 + 16, 65536, 1 << 20, (8 << 20) - 16, 8 << 20, (8 << 20) + 16, 12 << 20, 100]
failures = []


def values(rank, numel, salt=0):
    """Small integers in [-8, 8]: their sum over 8 ranks is exact in every type."""
    index = torch.arange(numel, device=DEVICE, dtype=torch.int64)
    return ((index * 7 + rank * 3 + salt) % 17 - 8)


def expected(numel, ranks, salt=0):
    return sum(values(r, numel, salt) for r in ranks)


def check(name, got, want):
    if not torch.equal(got.to(torch.float64), want.to(torch.float64)):
        wrong = (got.to(torch.float64) != want.to(torch.float64)).sum().item()
        failures.append(name)
        print(f"rank {RANK}: WRONG {name}: {wrong} of {got.numel()} elements", flush=True)


def phase_eager(group=None, ranks=None, tag="eager"):
    ranks = ranks if ranks is not None else list(range(WORLD))
    me = dist.get_rank()
    for dtype in DTYPES:
        element = torch.tensor([], dtype=dtype).element_size()
        for size in SIZES:
            numel = max(1, size // element)
            t = values(me, numel).to(dtype)
            dist.all_reduce(t, group=group)
            check(f"{tag} {dtype} {size}B", t, expected(numel, ranks))


def phase_graph():
    me = dist.get_rank()
    for dtype in DTYPES:
        for size in [4096, 1 << 20, 8 << 20]:
            numel = size // torch.tensor([], dtype=dtype).element_size()
            static = values(me, numel).to(dtype)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up outside capture, as PyTorch advises
                dist.all_reduce(static.clone())
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                dist.all_reduce(static)
            for replay in range(5):
                static.copy_(values(me, numel, salt=replay).to(dtype))
                graph.replay()
                torch.cuda.synchronize()
                check(f"graph {dtype} {size}B replay {replay}", static, expected(numel, range(WORLD), salt=replay))


def phase_groups():
    evens = [r for r in range(WORLD) if r % 2 == 0]
    sub = dist.new_group(evens)
    for round_ in range(3):
        phase_eager(tag=f"world round {round_}")
        if RANK in evens:
            phase_eager(group=sub, ranks=evens, tag=f"subgroup round {round_}")
    dist.destroy_process_group(sub)


def run(name, fn):
    before = len(failures)
    try:
        fn()
    except Exception as error:  # a crash is a failure of the phase, reported like one
        failures.append(f"{name}: {error!r}")
    status = "PASS" if len(failures) == before else "FAIL"
    print(f"rank {RANK}/{WORLD} phase {name}: {status}", flush=True)


def fresh_store(name):
    """A new rendezvous for each re-initialisation: re-using torchrun's store after
    destroy_process_group let one rank read the previous group's stale NCCL unique id."""
    port = os.environ.get("MASTER_PORT", "0")
    return f"file:///tmp/nccl-car-torch-e2e-{port}-{name}"


def main():
    torch.cuda.set_device(DEVICE)
    dist.init_process_group("nccl")
    # The NCCL PyTorch runs on (its wheel's, or the one nccl-version-check.sh preloads).
    print(f"rank {RANK}/{WORLD}: NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}", flush=True)
    run("eager", phase_eager)
    run("graph", phase_graph)
    run("groups", phase_groups)
    dist.destroy_process_group()

    dist.init_process_group("nccl", init_method=fresh_store("recreate"), rank=RANK, world_size=WORLD)
    run("recreate", phase_eager)
    dist.destroy_process_group()

    dist.init_process_group("nccl", device_id=DEVICE, init_method=fresh_store("device-id"), rank=RANK,
                            world_size=WORLD)
    run("device_id", phase_eager)
    dist.destroy_process_group()
    print(f"rank {RANK}/{WORLD}: {'PASS' if not failures else 'FAIL ' + str(failures[:5])}", flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
