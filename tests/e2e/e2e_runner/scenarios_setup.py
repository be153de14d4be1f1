"""Our set-up of a communicator never makes the host wait where NCCL would not (issue 24
item 3), on the one-GPU rig (tests/e2e/setup_order_e2e.cc): nonblocking communicators
first used in opposite orders on the ranks, and a blocking creation whose peer dies before
our set-up."""

from . import verdicts_setup as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")
PROGRAM = "setup_order_e2e"
# Even ranks use A first, odd ones B first: 4 ranks mix the orders within each pair too.
_ORDER_RANKS = (2, 4)
# Before the change each rank waited inside its first all-reduce, forever: the limit ends
# such a run (its watchdog ends it after 65 s already).
_ORDER_LIMIT = 120
_DEAD_PEER_RANKS = 3
# The surviving ranks' creating call returns within 30 s (80 s where NCCL connects to the
# dead peer inside it), their abort soon after; a rank stuck in it is ended here.
_DEAD_PEER_LIMIT = 100


def opposite_order(context):
    """setup_order_e2e opposite-order on 2 and 4 ranks: both nonblocking communicators'
    first all-reduces come back on every rank, then each takes its checked all-reduces."""
    program = context.build.program(PROGRAM)
    with context.mps():
        for ranks in _ORDER_RANKS:
            name = f"opposite-order-n{ranks}"
            # Two communicators a rank, whose first calls are in flight at once: room for a
            # grid of each on every rank.
            blocks = context.rig_blocks(2 * ranks)
            context.restart_mps()
            finished = context.run_ranks(
                name, ranks, lambda rank, id_file, ranks=ranks: [program, "opposite-order", str(rank), str(ranks),
                                                                 id_file],
                lambda rank, name=name, blocks=blocks: context.rig_rank_env(name, rank, NCCL_CAR_MAX_BLOCKS=blocks),
                limit=_ORDER_LIMIT)
            yield f"{ranks} processes on one GPU", verdicts.opposite_order(ranks, *outcomes(finished))


def dead_peer(context):
    """setup_order_e2e dead-peer on 3 ranks, the last one leaving after NCCL's own init: the
    others' ncclCommInitRank comes back after NCCL_CAR_SETUP_TIMEOUT_MS=5000. Run with NCCL
    alone first (the reference, only shown), then with the library under NCCL's defaults
    (its connections made at the first collective: our exchange's all-gather is the one that
    meets the dead peer) and under NCCL_RUNTIME_CONNECT=0 (made in init, before the peer
    dies: only our bound can end the wait). Under NCCL's defaults the wait for the dead peer
    is NCCL's own connection attempt, which it bounds itself (verdicts_setup.py)."""
    program = context.build.program(PROGRAM)
    ranks = _DEAD_PEER_RANKS
    blocks = context.rig_blocks(ranks)

    def run(name, loaded, first_call=False, **settings):
        def env_of(rank):
            if not loaded:
                return dict(context.rig_env(), NCCL_HOSTID=f"{name}-rank-{rank}")
            return context.rig_rank_env(name, rank, NCCL_CAR_MAX_BLOCKS=blocks,
                                        NCCL_CAR_SETUP_TIMEOUT_MS=verdicts.DEAD_PEER_TIMEOUT_MS, **settings)
        context.restart_mps()
        return outcomes(context.run_ranks(
            name, ranks, lambda rank, id_file: [program, "dead-peer", str(rank), str(ranks), id_file] +
            (["first-call"] if first_call else []), env_of, limit=_DEAD_PEER_LIMIT))

    with context.mps():
        reference = run("dead-peer-nccl", loaded=False)
        # Where NCCL alone meets the dead peer: its first collective (shown, not judged).
        first_call = run("dead-peer-nccl-first-call", loaded=False, first_call=True)
        yield (f"{ranks} processes on one GPU, NCCL's defaults",
               verdicts.dead_peer(ranks, *run("dead-peer", loaded=True), reference=reference, lazy_connect=True,
                                  first_call=first_call))
        yield (f"{ranks} processes on one GPU, NCCL_RUNTIME_CONNECT=0",
               verdicts.dead_peer(ranks, *run("dead-peer-eager-connect", loaded=True, NCCL_RUNTIME_CONNECT=0)))


register("setup-opposite-order", "setup_order_e2e opposite-order: two nonblocking communicators first used in "
         "opposite orders on the ranks do not deadlock, each set up once and taken, 2 and 4 processes on one GPU",
         RIG, 2 * _ORDER_LIMIT + 60, opposite_order)
register("setup-dead-peer", "setup_order_e2e dead-peer: a peer gone after NCCL's init, ncclCommInitRank comes back "
         "after NCCL_CAR_SETUP_TIMEOUT_MS=5000 and WARNs, 3 processes on one GPU (NCCL alone as reference)",
         RIG, 4 * _DEAD_PEER_LIMIT + 60, dead_peer)
