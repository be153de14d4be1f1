"""PyTorch all_reduce with every reduction op on the integer and floating types PyTorch hands
NCCL, at odd lengths and odd addresses, through libnccl-car.so.

Run by tests/e2e/run_e2e.py (torch-all-ops-*, multi-gpu-torch-all-ops) under torchrun with
LD_PRELOAD set; one process per rank, all on one GPU (the rig) or, with
E2E_ONE_GPU_PER_RANK=1, on GPU LOCAL_RANK. For every type, op, length and placement, each
rank fills a tensor framed by guard elements, all-reduces it in place and compares it with a
reference built from every rank's input:

  types       int8, uint8, int32, int64, float16, bfloat16, float32, float64 (not fp8: PyTorch
              reduces no fp8 tensor through NCCL; nor uint32/uint64, which it does not map)
  ops         SUM, AVG, MAX, MIN, PRODUCT
  lengths     1, 3, 1001, 65537, 1000003 elements (up to 8,000,024 bytes: the library may
              leave the largest of a type to NCCL as too large)
  placements  where the allocator put it (aligned), and one element further (not 16-byte
              aligned)

The inputs are small integers that keep every result exact and in range of every type, on up
to 8 ranks: SUM and AVG add values in [-8, 8] (unsigned: [0, 16]); MAX and MIN pick among
[-11, 11] ([0, 22]); PRODUCT multiplies -1, 1, 2, -2 and some zeros, with a 2 only where
(index + rank) % 4 == 0, so at most two factors of 2 meet in an element (|product| <= 4).

  integers    bit-exact. AVG is NCCL's: the sum divided by the world size, truncated toward
              zero (PyTorch hands ReduceOp.AVG on integers to ncclAvg).
  floats      SUM, MAX, MIN, PRODUCT exactly: every partial result is an integer of at most 7
              bits, exact in bf16 and fp16. AVG against the float64 reference within
              WORLD * eps(type) * 8: one rounding per rank of a term no larger than 8 (exact
              anyway when the world size is a power of two).
  guards      the 32 elements before and after the tensor unchanged.

A combination PyTorch refuses before NCCL is called fails like a wrong result: every one of
these is one PyTorch hands NCCL (AVG on integers goes to ncclAvg), so a refusal is a change
to look at, not a case to leave out. Prints `rank R/W: PASS N all-reduces (SHAPE), 0 wrong`
(N the whole SHAPE, which the runner checks) or `rank R/W: FAIL ...` (and one WRONG line per
wrong check, the first 10) and exits 1 on any failure.
"""
import sys

from torch_rank import RANK, WORLD, claim_host_id, device

claim_host_id("torch-ops-e2e")

import torch  # noqa: E402  (after NCCL_HOSTID is set)
import torch.distributed as dist  # noqa: E402

DEVICE = device(torch)

INTEGERS = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OPS = [("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX),
       ("min", dist.ReduceOp.MIN), ("prod", dist.ReduceOp.PRODUCT)]
LENGTHS = [1, 3, 1001, 65537, 1000003]
OFFSETS = [0, 1]  # elements from where the allocator put the tensor
GUARD = 32        # elements each side of the tensor that must stay as they were
SENTINEL = 99     # no result comes near it; exact in every type
MAX_TERM = 8      # no AVG term is larger
REPORTED = 10     # WRONG lines printed at most

wrong_checks = []


def say(line):
    """One write per line: the ranks share torchrun's output, and print() writes the line and
    its newline apart, so that lines of two ranks could run into one."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rank_input(op, rank, numel, unsigned):
    """Rank `rank`'s input for `op`, as int64 on the device."""
    index = torch.arange(numel, device=DEVICE, dtype=torch.int64)
    if op in ("sum", "avg"):
        value = (index * 7 + rank * 3) % 17
        return value if unsigned else value - 8
    if op in ("max", "min"):
        value = (index * 11 + rank * 5) % 23
        return value if unsigned else value - 11
    magnitude = 1 + ((index + rank) % 4 == 0).long()
    sign = 1 if unsigned else 1 - 2 * ((index * 5 + rank * 3) % 7 < 3).long()
    return magnitude * sign * ((index * 13 + rank * 7) % 29 != 0).long()


def reference(op, numel, unsigned, floating):
    """The all-reduced value: int64 for integers, float64 for floating types."""
    inputs = torch.stack([rank_input(op, rank, numel, unsigned) for rank in range(WORLD)])
    if op == "sum":
        result = inputs.sum(0)
    elif op == "avg":
        total = inputs.sum(0)
        return total.to(torch.float64) / WORLD if floating else torch.div(total, WORLD, rounding_mode="trunc")
    elif op == "max":
        result = inputs.amax(0)
    elif op == "min":
        result = inputs.amin(0)
    else:
        result = inputs.prod(0)
    return result.to(torch.float64) if floating else result


def avg_tolerance(dtype):
    return WORLD * torch.finfo(dtype).eps * MAX_TERM


def mismatch(got, want, dtype, op):
    """None when `got` is right, else a description of what is wrong."""
    floating = dtype.is_floating_point
    got = got.to(torch.float64 if floating else torch.int64)
    if floating and op == "avg":
        bad = (got - want).abs() > avg_tolerance(dtype)
    else:
        bad = got != want
    count = int(bad.sum().item())
    if count == 0:
        return None
    first = int(bad.nonzero()[0].item())
    return f"{count} of {got.numel()} elements (first at {first}: got {got[first].item()}, want {want[first].item()})"


def report_wrong(label, wrong):
    wrong_checks.append(label)
    if len(wrong_checks) <= REPORTED:
        say(f"rank {RANK}/{WORLD}: WRONG {label}: {wrong}")


def check_one(dtype, name, op, numel, offset):
    """One all-reduce of a tensor `offset` elements past an aligned place, checked."""
    unsigned = dtype == torch.uint8
    start = GUARD + offset  # GUARD elements are 16-byte multiples: offset 0 stays aligned
    framed = torch.full((start + numel + GUARD,), SENTINEL, dtype=dtype, device=DEVICE)
    tensor = framed[start:start + numel]
    tensor.copy_(rank_input(name, RANK, numel, unsigned).to(dtype))
    label = f"{str(dtype).replace('torch.', '')} {name} n={numel} at +{offset}"
    try:
        dist.all_reduce(tensor, op=op)
    except (TypeError, ValueError) as refusal:  # refused before NCCL: the next call can go on
        report_wrong(label, f"PyTorch refuses it: {refusal!r}")
        return
    torch.cuda.synchronize()
    wrong = mismatch(tensor, reference(name, numel, unsigned, dtype.is_floating_point), dtype, name)
    guards = torch.cat([framed[:start], framed[start + numel:]])
    if not bool((guards == SENTINEL).all().item()):
        wrong = (wrong + "; " if wrong else "") + "an element outside the tensor changed"
    if wrong:
        report_wrong(label, wrong)


def main():
    torch.cuda.set_device(DEVICE)
    dist.init_process_group("nccl")
    made = 0
    try:
        for dtype in INTEGERS + FLOATS:
            for name, op in OPS:
                for numel in LENGTHS:
                    for offset in OFFSETS:
                        check_one(dtype, name, op, numel, offset)
                        made += 1
    except Exception as error:  # a crash fails the rank, and says where
        wrong_checks.append(f"crashed after {made} all-reduces: {error!r}")
        say(f"rank {RANK}/{WORLD}: WRONG {wrong_checks[-1]}")
    dist.destroy_process_group()
    shape = f"{len(INTEGERS + FLOATS)} types x {len(OPS)} ops x {len(LENGTHS)} lengths x {len(OFFSETS)} placements"
    if wrong_checks:
        say(f"rank {RANK}/{WORLD}: FAIL {len(wrong_checks)} of {made} all-reduces wrong ({shape}): "
            f"{wrong_checks[:5]}")
        return 1
    say(f"rank {RANK}/{WORLD}: PASS {made} all-reduces ({shape}), 0 wrong")
    return 0


if __name__ == "__main__":
    sys.exit(main())
