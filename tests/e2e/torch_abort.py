"""A PyTorch job whose peer never joins an all-reduce fails with NCCL's usual timeout
error instead of hanging: PyTorch's watchdog calls ncclCommAbort, our kernel (spinning
for the missing peer) returns, and the process ends.

Run by tests/e2e/run_e2e.py (scenario torch-watchdog-abort) with 2 ranks on one GPU: rank 0
calls all_reduce (ours) and blocks on it; rank 1 never calls it. The script prints the
seconds rank 0 spent blocked; the watchdog's timeout is 5 s.
"""
import datetime
import os
import time

RANK = int(os.environ["RANK"])
os.environ.setdefault("NCCL_HOSTID", f"torch-abort-rank-{RANK}")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=5))
t = torch.ones(1 << 16, device="cuda")
dist.all_reduce(t)  # both ranks: creates the communicator and sets it up
torch.cuda.synchronize()
print(f"rank {RANK}: first all_reduce done", flush=True)
if RANK == 0:
    start = time.monotonic()
    dist.all_reduce(t)  # rank 1 never joins: our kernel waits until the watchdog aborts
    try:
        torch.cuda.synchronize()
    finally:
        print(f"rank 0: blocked {time.monotonic() - start:.1f} s", flush=True)
else:
    time.sleep(60)
