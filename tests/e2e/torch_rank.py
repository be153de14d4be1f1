"""Where a PyTorch end-to-end script (torch_e2e.py, torch_ops_e2e.py) runs: its rank and world
size from torchrun, a host id of its own on the one-GPU rig, and its GPU. Imported before
torch: NCCL_HOSTID is set here."""
import os

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
# E2E_ONE_GPU_PER_RANK=1: rank r uses GPU LOCAL_RANK (a multi-GPU machine); otherwise every
# rank shares GPU E2E_DEVICE (the one-GPU rig).
ONE_GPU_PER_RANK = os.environ.get("E2E_ONE_GPU_PER_RANK") == "1"


def claim_host_id(prefix):
    """Several ranks on one GPU: real NCCL accepts that only with a distinct host id per rank."""
    if not ONE_GPU_PER_RANK:
        os.environ.setdefault("NCCL_HOSTID", f"{prefix}-rank-{RANK}")


def device(torch):
    """This rank's GPU, as a torch.device."""
    if ONE_GPU_PER_RANK:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return torch.device("cuda", int(os.environ.get("E2E_DEVICE", "0")))
