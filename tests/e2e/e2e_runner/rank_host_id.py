"""Runs the rest of the command line with NCCL_HOSTID set from the MPI rank, so that NCCL
accepts several ranks on one GPU: mpirun can give every rank the same variables, not one
each. Usage: python3 rank_host_id.py PROGRAM ARGS..."""

import os
import sys

os.environ["NCCL_HOSTID"] = f"nt-rank-{os.environ.get('OMPI_COMM_WORLD_RANK', '0')}"
os.execvp(sys.argv[1], sys.argv[1:])
