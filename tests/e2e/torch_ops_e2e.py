"""PyTorch all_reduce and reduce_scatter_tensor with every reduction op, all_gather_into_tensor
and all_gather (the list form), on the integer and floating types PyTorch hands NCCL, at odd
lengths and odd addresses, through libnccl-car.so.

Run by tests/e2e/run_e2e.py (torch-all-ops-*, multi-gpu-torch-all-ops) under torchrun with
LD_PRELOAD set; one process per rank, all on one GPU (the rig) or, with
E2E_ONE_GPU_PER_RANK=1, on GPU LOCAL_RANK. Four matrices, every case one call, each checked
against a reference built from every rank's input:

  all-reduces        8 types x 5 ops x 5 lengths x 2 placements
  reduce-scatters    8 types x 5 ops x 4 lengths x 3 placements
  all-gathers        8 types x 4 lengths x 3 placements (all_gather_into_tensor)
  list all-gathers   8 types x 4 lengths x 2 placements (all_gather into a list of tensors,
                     which PyTorch turns into one ncclAllGather and copies out)

  types       int8, uint8, int32, int64, float16, bfloat16, float32, float64 (not fp8: PyTorch
              reduces no fp8 tensor through NCCL; nor uint32/uint64, which it does not map)
  ops         SUM, AVG, MAX, MIN, PRODUCT
  lengths     all-reduce: 1, 3, 1001, 65537, 1000003 elements (up to 8,000,024 bytes: the
              library may leave the largest of a type to NCCL as too large). Reduce-scatter
              and all-gather: 1, 3, 1001, 16383 elements a rank (its result, its part), so
              that the whole message stays within the library's 1 MiB default for them
              (16383 x 8 bytes x 8 ranks = 1,048,512 bytes): every one of those calls is ours.
  placements  where the allocator put it (aligned), and one element further (not 16-byte
              aligned); reduce-scatter and all-gather also in place, NCCL's in-place forms
              (the output is this rank's part of the input; the input is this rank's part of
              the output)

Every call's inputs differ per rank and per call (a call number shifts the pattern). The
reduced inputs are small integers that keep every result exact and in range of every type, on
up to 8 ranks: SUM and AVG add values in [-8, 8] (unsigned: [0, 16]); MAX and MIN pick among
[-11, 11] ([0, 22]); PRODUCT multiplies -1, 1, 2, -2 and some zeros, with a 2 only where
(index + rank) % 4 == 0, so at most two factors of 2 meet in an element (|product| <= 4).
The gathered inputs are copied, so every bit counts: integers in range of every type, halves
in [-62.5, 62.5] (exact in bf16) and some -0.0 in the floating types.

  integers    bit-exact. AVG is NCCL's: the sum divided by the world size, truncated toward
              zero (PyTorch hands ReduceOp.AVG on integers to ncclAvg).
  floats      SUM, MAX, MIN, PRODUCT exactly: every partial result is an integer of at most 7
              bits, exact in bf16 and fp16. AVG against the float64 reference within
              WORLD * eps(type) * 8: one rounding per rank of a term no larger than 8 (exact
              anyway when the world size is a power of two).
  gathers     bit for bit (-0.0 must stay -0.0).
  guards      the 32 elements before and after every tensor unchanged, and an out-of-place
              call's input as it was.

A combination PyTorch refuses before NCCL is called fails like a wrong result: every one of
these is one PyTorch hands NCCL (AVG on integers goes to ncclAvg), so a refusal is a change
to look at, not a case to leave out. Prints, for each matrix, `rank R/W: PASS N NOUN (SHAPE),
0 wrong` (N the whole SHAPE, which the runner checks) or `rank R/W: FAIL ...` (and one WRONG
line per wrong check, the first 10) and exits 1 on any failure.
"""
import itertools
import sys
from dataclasses import dataclass
from typing import Callable

from torch_rank import RANK, WORLD, claim_host_id, device

claim_host_id("torch-ops-e2e")

import torch  # noqa: E402  (after NCCL_HOSTID is set)
import torch.distributed as dist  # noqa: E402

DEVICE = device(torch)

INTEGERS = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TYPES = INTEGERS + FLOATS
OPS = [("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX),
       ("min", dist.ReduceOp.MIN), ("prod", dist.ReduceOp.PRODUCT)]
LENGTHS = [1, 3, 1001, 65537, 1000003]
# Each rank's part (all-gather) or result (reduce-scatter): 16383 x 8 bytes x 8 ranks stays
# within the library's 1 MiB default for the whole message.
PART_LENGTHS = [1, 3, 1001, 16383]
OFFSETS = [0, 1]  # elements from where the allocator put the tensor
IN_PLACE = "in place"
PART_PLACEMENTS = OFFSETS + [IN_PLACE]
GUARD = 32        # elements each side of the tensor that must stay as they were
SENTINEL = 99     # no result comes near it; exact in every type
MAX_TERM = 8      # no AVG term is larger
REPORTED = 10     # WRONG lines printed at most
# Integers of the same width as each floating type: gathered elements compare bit for bit.
BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
        torch.float64: torch.int64}

wrong_checks = {}         # matrix noun -> labels of its wrong checks
call_numbers = itertools.count()


def say(line):
    """One write per line: the ranks share torchrun's output, and print() writes the line and
    its newline apart, so that lines of two ranks could run into one."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Framed:
    """`numel` elements of `dtype`, `offset` elements past where the allocator put them (GUARD
    elements are 16-byte multiples: offset 0 stays aligned), between GUARD SENTINEL elements
    on each side that no call may change."""

    def __init__(self, numel, dtype, offset):
        self.start = GUARD + offset
        self.frame = torch.full((self.start + numel + GUARD,), SENTINEL, dtype=dtype, device=DEVICE)
        self.tensor = self.frame[self.start:self.start + numel]

    def guards_intact(self):
        guards = torch.cat([self.frame[:self.start], self.frame[self.start + self.tensor.numel():]])
        return bool((guards == SENTINEL).all().item())


def rank_input(op, rank, numel, unsigned, salt):
    """Rank `rank`'s input for `op` in call `salt`, as int64 on the device."""
    index = torch.arange(numel, device=DEVICE, dtype=torch.int64) + salt
    if op in ("sum", "avg"):
        value = (index * 7 + rank * 3) % 17
        return value if unsigned else value - 8
    if op in ("max", "min"):
        value = (index * 11 + rank * 5) % 23
        return value if unsigned else value - 11
    magnitude = 1 + ((index + rank) % 4 == 0).long()
    sign = 1 if unsigned else 1 - 2 * ((index * 5 + rank * 3) % 7 < 3).long()
    return magnitude * sign * ((index * 13 + rank * 7) % 29 != 0).long()


def reference(op, numel, unsigned, floating, salt):
    """The all-reduced value of call `salt`: int64 for integers, float64 for floating types."""
    inputs = torch.stack([rank_input(op, rank, numel, unsigned, salt) for rank in range(WORLD)])
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


def gather_input(rank, numel, dtype, salt):
    """Rank `rank`'s part in call `salt`, in `dtype`: integers in [-125, 125] ([0, 250] for
    uint8), halves of them with some -0.0 in the floating types."""
    index = torch.arange(numel, device=DEVICE, dtype=torch.int64)
    value = (index * 31 + rank * 17 + salt * 7) % 251
    if dtype == torch.uint8:
        return value.to(dtype)
    value = value - 125
    if not dtype.is_floating_point:
        return value.to(dtype)
    halves = value.to(torch.float64) / 2
    return torch.where(index % 13 == 7, torch.full_like(halves, -0.0), halves).to(dtype)


def bits(tensor):
    """The tensor's elements as integers of their own width, as int64: equal only bit for bit."""
    return tensor.view(BITS.get(tensor.dtype, tensor.dtype)).to(torch.int64)


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


def bit_mismatch(got, want):
    """None when `got` holds `want`'s bits, else a description (of the bits, as integers)."""
    return mismatch(bits(got), bits(want), torch.int64, None)


def report_wrong(noun, label, wrong):
    wrong_checks.setdefault(noun, []).append(label)
    if sum(map(len, wrong_checks.values())) <= REPORTED:
        say(f"rank {RANK}/{WORLD}: WRONG {label}: {wrong}")


def called(noun, label, collective):
    """Makes the call; a refusal before NCCL (TypeError, ValueError: the next call can go on)
    is reported wrong, and False returned."""
    try:
        collective()
    except (TypeError, ValueError) as refusal:
        report_wrong(noun, label, f"PyTorch refuses it: {refusal!r}")
        return False
    torch.cuda.synchronize()
    return True


def judge(noun, label, wrong, framed, untouched=()):
    """Reports `wrong` (a mismatch or None), adding any guard of `framed` changed and any
    (tensor, its bits before the call) of an input that changed."""
    problems = [wrong] if wrong else []
    if not all(frame.guards_intact() for frame in framed):
        problems.append("an element outside the tensors changed")
    if any(not torch.equal(bits(tensor), before) for tensor, before in untouched):
        problems.append("the input changed")
    if problems:
        report_wrong(noun, label, "; ".join(problems))


def type_name(dtype):
    return str(dtype).replace("torch.", "")


def placement_name(placement):
    return placement if placement == IN_PLACE else f"at +{placement}"


def check_all_reduce(dtype, op, numel, offset):
    """One in-place all-reduce of a tensor `offset` elements past an aligned place, checked."""
    name, reduce_op = op
    salt = next(call_numbers)
    unsigned = dtype == torch.uint8
    framed = Framed(numel, dtype, offset)
    framed.tensor.copy_(rank_input(name, RANK, numel, unsigned, salt).to(dtype))
    label = f"{type_name(dtype)} {name} n={numel} at +{offset}"
    if called("all-reduces", label, lambda: dist.all_reduce(framed.tensor, op=reduce_op)):
        want = reference(name, numel, unsigned, dtype.is_floating_point, salt)
        judge("all-reduces", label, mismatch(framed.tensor, want, dtype, name), [framed])


def check_reduce_scatter(dtype, op, numel, placement):
    """One reduce_scatter_tensor of WORLD x `numel` elements into this rank's `numel`, out of
    place `placement` elements past aligned tensors, or in place (the output is this rank's
    part of the input)."""
    name, reduce_op = op
    salt = next(call_numbers)
    unsigned = dtype == torch.uint8
    source = Framed(WORLD * numel, dtype, 0 if placement == IN_PLACE else placement)
    source.tensor.copy_(rank_input(name, RANK, WORLD * numel, unsigned, salt).to(dtype))
    mine = slice(RANK * numel, (RANK + 1) * numel)
    if placement == IN_PLACE:
        framed, output, untouched = [source], source.tensor[mine], []
    else:
        result = Framed(numel, dtype, placement)
        framed, output = [source, result], result.tensor
        untouched = [(source.tensor, bits(source.tensor).clone())]
    label = f"reduce-scatter {type_name(dtype)} {name} n={numel} {placement_name(placement)}"
    if called("reduce-scatters", label, lambda: dist.reduce_scatter_tensor(output, source.tensor, op=reduce_op)):
        want = reference(name, WORLD * numel, unsigned, dtype.is_floating_point, salt)[mine]
        judge("reduce-scatters", label, mismatch(output, want, dtype, name), framed, untouched)


def check_all_gather(dtype, numel, placement):
    """One all_gather_into_tensor of this rank's `numel` elements into WORLD x `numel`, out of
    place `placement` elements past aligned tensors, or in place (the input is this rank's
    part of the output)."""
    salt = next(call_numbers)
    gathered = Framed(WORLD * numel, dtype, 0 if placement == IN_PLACE else placement)
    if placement == IN_PLACE:
        part, framed = gathered.tensor[RANK * numel:(RANK + 1) * numel], [gathered]
    else:
        source = Framed(numel, dtype, placement)
        part, framed = source.tensor, [gathered, source]
    part.copy_(gather_input(RANK, numel, dtype, salt))
    untouched = [] if placement == IN_PLACE else [(part, bits(part).clone())]
    label = f"all-gather {type_name(dtype)} n={numel} {placement_name(placement)}"
    if called("all-gathers", label, lambda: dist.all_gather_into_tensor(gathered.tensor, part)):
        want = torch.cat([gather_input(rank, numel, dtype, salt) for rank in range(WORLD)])
        judge("all-gathers", label, bit_mismatch(gathered.tensor, want), framed, untouched)


def check_all_gather_list(dtype, numel, offset):
    """One all_gather of this rank's `numel` elements, `offset` past an aligned place, into a
    list of WORLD tensors."""
    salt = next(call_numbers)
    source = Framed(numel, dtype, offset)
    source.tensor.copy_(gather_input(RANK, numel, dtype, salt))
    outputs = [torch.full((numel,), SENTINEL, dtype=dtype, device=DEVICE) for _ in range(WORLD)]
    label = f"list all-gather {type_name(dtype)} n={numel} at +{offset}"
    if called("list all-gathers", label, lambda: dist.all_gather(outputs, source.tensor)):
        want = torch.cat([gather_input(rank, numel, dtype, salt) for rank in range(WORLD)])
        judge("list all-gathers", label, bit_mismatch(torch.cat(outputs), want), [source],
              [(source.tensor, bits(gather_input(RANK, numel, dtype, salt)))])


@dataclass(frozen=True)
class Matrix:
    """One collective's cases: the noun its report counts them by, its dimensions (name,
    values), and the check of one case (a value of each dimension)."""
    noun: str
    dimensions: tuple
    check: Callable

    def cases(self):
        return itertools.product(*(values for _, values in self.dimensions))

    @property
    def whole(self):
        return len(list(self.cases()))

    @property
    def shape(self):
        return " x ".join(f"{len(values)} {name}" for name, values in self.dimensions)


MATRICES = (
    Matrix("all-reduces", (("types", TYPES), ("ops", OPS), ("lengths", LENGTHS), ("placements", OFFSETS)),
           check_all_reduce),
    Matrix("reduce-scatters", (("types", TYPES), ("ops", OPS), ("lengths", PART_LENGTHS),
                               ("placements", PART_PLACEMENTS)), check_reduce_scatter),
    Matrix("all-gathers", (("types", TYPES), ("lengths", PART_LENGTHS), ("placements", PART_PLACEMENTS)),
           check_all_gather),
    Matrix("list all-gathers", (("types", TYPES), ("lengths", PART_LENGTHS), ("placements", OFFSETS)),
           check_all_gather_list),
)


def run_matrices():
    """Every case of every matrix, in order; how many calls of each were made. A crash ends
    them all (the ranks would no longer make the same calls), and says where."""
    made = {matrix.noun: 0 for matrix in MATRICES}
    for matrix in MATRICES:
        try:
            for case in matrix.cases():
                matrix.check(*case)
                made[matrix.noun] += 1
        except Exception as error:
            report_wrong(matrix.noun, f"crashed after {made[matrix.noun]} {matrix.noun}", repr(error))
            break
    return made


def report(matrix, made):
    """The matrix's PASS line (every case made, none wrong) or FAIL line; whether it passed."""
    wrong = wrong_checks.get(matrix.noun, [])
    if wrong or made != matrix.whole:
        say(f"rank {RANK}/{WORLD}: FAIL {len(wrong)} of {made} {matrix.noun} wrong, {matrix.whole} to make "
            f"({matrix.shape}): {wrong[:5]}")
        return False
    say(f"rank {RANK}/{WORLD}: PASS {made} {matrix.noun} ({matrix.shape}), 0 wrong")
    return True


def main():
    torch.cuda.set_device(DEVICE)
    dist.init_process_group("nccl")
    made = run_matrices()
    dist.destroy_process_group()
    passed = [report(matrix, made[matrix.noun]) for matrix in MATRICES]
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
