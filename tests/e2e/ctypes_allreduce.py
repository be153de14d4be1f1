"""One rank of an all-reduce made through ctypes only, as vLLM's and SGLang's PyNccl do:
NCCL from ctypes.CDLL(LIBRARY) and every function looked up on that handle; device memory
and streams from the CUDA driver API (libcuda.so.1, always there with the driver). Run by
tests/e2e/run_e2e.py (ctypes-*), one process per rank, under LD_AUDIT or the drop-in folder.

    python3 ctypes_allreduce.py RANK NRANKS ID_FILE [LIBRARY] [DEVICE]

LIBRARY is a name (default libnccl.so.2) or a path (JAX's way). With CTYPES_IMPORT_TORCH=1 it
imports PyTorch and starts its CUDA first, as vLLM's and SGLang's PyNccl run beside PyTorch:
PyTorch's NCCL (and, under LD_AUDIT or a drop-in folder, our front) is then loaded before
the ctypes.CDLL, which must find the same library. All-reduces of fp32, bf16
and fp16 sums from 16 KiB to 12 MiB (above the 8 MiB limit: forwarded), each 3 times, plus
one broadcast (a call we forward). Inputs are small integers, so every sum is exact in every
type and order. Prints "rank R/N: PASS (...)" or the first wrong elements; exit 1 on any."""

import array
import ctypes
import os
import struct
import sys
import time

FLOAT16, FLOAT32, BFLOAT16, SUM = 6, 7, 9, 0
SIZES = [16 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20, 12 << 20]
REPEATS = 3


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_ubyte * 128)]


def check(ok, what):
    if not ok:
        raise SystemExit(f"rank {RANK}: {what} failed")


def cuda_driver():
    cuda = ctypes.CDLL("libcuda.so.1")
    pointer = ctypes.c_void_p
    cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    # On the all-reduce's own stream: a copy on the legacy stream is not ordered with it.
    cuda.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, pointer]
    cuda.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, pointer]
    cuda.cuMemcpyDtoH_v2.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_size_t]
    cuda.cuStreamCreate.argtypes = [ctypes.POINTER(pointer), ctypes.c_uint]
    cuda.cuStreamSynchronize.argtypes = [pointer]
    return cuda


def nccl_library(name):
    nccl = ctypes.CDLL(name)
    pointer = ctypes.c_void_p
    nccl.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(pointer), ctypes.c_int, UniqueId, ctypes.c_int]
    collective = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, pointer, pointer]
    nccl.ncclAllReduce.argtypes = collective  # ..., datatype, op, comm, stream
    nccl.ncclBroadcast.argtypes = collective  # ..., datatype, root, comm, stream
    nccl.ncclCommDestroy.argtypes = [pointer]
    return nccl


def share_unique_id(nccl, path):
    uid = UniqueId()
    if RANK == 0:
        check(nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0, "ncclGetUniqueId")
        with open(path + ".tmp", "wb") as stream:
            stream.write(bytes(uid.internal))
        os.rename(path + ".tmp", path)  # whole or absent
        return uid
    for _ in range(6000):
        if os.path.exists(path):
            with open(path, "rb") as stream:
                ctypes.memmove(uid.internal, stream.read(128), 128)
            return uid
        time.sleep(0.01)
    raise SystemExit(f"rank {RANK}: no unique id in {path} after 60 s")


def pattern(rank, count):
    """Rank `rank`'s input: (i * 7 + rank * 3) % 17 - 8, which repeats every 17 elements."""
    period = [(i * 7 + rank * 3) % 17 - 8 for i in range(17)]
    return (period * (count // 17 + 1))[:count]


def encode(values, datatype):
    if datatype == FLOAT16:
        return struct.pack(f"<{len(values)}e", *values)
    fp32 = array.array("f", values).tobytes()
    if datatype == FLOAT32:
        return fp32
    bf16 = bytearray(len(fp32) // 2)  # bf16: the upper half of each little-endian fp32
    bf16[0::2], bf16[1::2] = fp32[2::4], fp32[3::4]
    return bytes(bf16)


def main():
    global RANK
    RANK, ranks, id_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    library = sys.argv[4] if len(sys.argv) > 4 else "libnccl.so.2"
    device = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    if os.environ.get("CTYPES_IMPORT_TORCH") == "1":
        import torch  # noqa: PLC0415  (only when asked: most runs have no PyTorch)
        torch.cuda.set_device(device)
        torch.cuda.init()
        print(f"rank {RANK}/{ranks}: PyTorch {torch.__version__} imported first, its NCCL "
              f"{torch.cuda.nccl.version()}", flush=True)
    cuda = cuda_driver()
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(handle), device) == 0, "cuInit")
    # The primary context: the one the CUDA runtime inside NCCL (and inside us) uses too.
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle) == 0, "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context) == 0, "cuCtxSetCurrent")
    nccl = nccl_library(library)
    comm = ctypes.c_void_p()
    check(nccl.ncclCommInitRank(ctypes.byref(comm), ranks, share_unique_id(nccl, id_file), RANK) == 0,
          "ncclCommInitRank")
    stream = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(stream), 1) == 0, "cuStreamCreate")  # non-blocking
    largest = max(SIZES)
    send, recv = ctypes.c_uint64(), ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(send), largest) == 0 and
          cuda.cuMemAlloc_v2(ctypes.byref(recv), largest) == 0, "cuMemAlloc")

    checks, wrong = 0, 0
    for datatype, size in ((FLOAT32, 4), (BFLOAT16, 2), (FLOAT16, 2)):
        for nbytes in SIZES:
            count = nbytes // size
            sums = [sum(column) for column in zip(*(pattern(r, 17) for r in range(ranks)))]
            expected = encode((sums * (count // 17 + 1))[:count], datatype)
            check(cuda.cuMemcpyHtoDAsync_v2(send.value, encode(pattern(RANK, count), datatype), nbytes,
                                            stream) == 0, "upload")
            for _ in range(REPEATS):
                # Poisoned first: a call that wrote nothing cannot pass on an earlier result.
                check(cuda.cuMemsetD8Async(recv.value, 0xFF, nbytes, stream) == 0, "poison")
                check(nccl.ncclAllReduce(send.value, recv.value, count, datatype, SUM, comm, stream) == 0,
                      "ncclAllReduce")
                check(cuda.cuStreamSynchronize(stream) == 0, "cuStreamSynchronize")
                got = ctypes.create_string_buffer(nbytes)
                check(cuda.cuMemcpyDtoH_v2(got, recv.value, nbytes) == 0, "download")
                checks += 1
                if got.raw != expected:
                    wrong += 1
                    first = next(i for i in range(0, nbytes, size) if got.raw[i:i + size] != expected[i:i + size])
                    print(f"rank {RANK}/{ranks}: WRONG type {datatype} {nbytes} bytes from element {first // size}",
                          file=sys.stderr)
    # A call we do not hook: rank 0's data everywhere.
    check(cuda.cuMemcpyHtoDAsync_v2(send.value, encode(pattern(RANK, 4096), FLOAT32), 4 * 4096, stream) == 0,
          "upload")
    check(cuda.cuMemsetD8Async(recv.value, 0xFF, 4 * 4096, stream) == 0, "poison")
    check(nccl.ncclBroadcast(send.value, recv.value, 4096, FLOAT32, 0, comm, stream) == 0, "ncclBroadcast")
    check(cuda.cuStreamSynchronize(stream) == 0, "cuStreamSynchronize")
    got = ctypes.create_string_buffer(4 * 4096)
    check(cuda.cuMemcpyDtoH_v2(got, recv.value, 4 * 4096) == 0, "download")
    checks += 1
    wrong += got.raw != encode(pattern(0, 4096), FLOAT32)
    check(nccl.ncclCommDestroy(comm) == 0, "ncclCommDestroy")
    status = "PASS" if wrong == 0 else "FAIL"
    print(f"rank {RANK}/{ranks}: {status} ({checks} checks, {wrong} wrong, NCCL from {library})", flush=True)
    return 0 if wrong == 0 else 1


RANK = 0
if __name__ == "__main__":
    sys.exit(main())
