"""One rank of ncclAllReduceConfig calls made through ctypes only (as ctypes_allreduce.py
makes ncclAllReduce ones): fp32 sums of 16 KiB to 12 MiB, each with a per-call config whose
our kernel option (vendorId 0x636172, optionId 1) is "auto", "1shot", "2shot" or "nccl" in
turn, every other one with maxCTAs 4, and every one with a launch-completion event (created
with CU_EVENT_DISABLE_TIMING, as NCCL requires). Needs NCCL 2.32 or newer underneath. Each
output is poisoned first and checked exactly. Before each call the event is recorded on a
stream held back by a host flag, so it stays pending unless the call records it again on its
own stream: after that stream's work it must be complete. Prints what the library must
have counted, "rank R/N: expect requested=... too-large=... 1shot>=... 2shot>=...", then
"rank R/N: PASS (...)" or what was wrong; exit 1 on anything wrong.

    python3 ctypes_allreduce_config.py RANK NRANKS ID_FILE [LIBRARY] [DEVICE]"""

import ctypes
import sys

import ctypes_allreduce as client

UNDEF_INT = -(2 ** 31)
API_MAGIC = 0xCAFEBEEF
CAR_VENDOR, CAR_KERNEL_OPTION = 0x636172, 1
EVENT_DISABLE_TIMING, HOST_ALLOC_DEVICEMAP, WAIT_VALUE_GEQ, NOT_READY = 0x2, 0x2, 0x0, 600
KERNELS = (b"auto", b"1shot", b"2shot", b"nccl")
LIMIT = 8 << 20  # the library's default NCCL_CAR_MAX_BYTES


class ConfigExt(ctypes.Structure):
    pass


ConfigExt._fields_ = [("next", ctypes.POINTER(ConfigExt)), ("vendorId", ctypes.c_int), ("optionId", ctypes.c_int),
                      ("s", ctypes.c_char_p)]


class CollConfig(ctypes.Structure):  # ncclCollConfig_t of nccl.h 2.32.3
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("ext", ctypes.POINTER(ConfigExt)), ("minCTAs", ctypes.c_int), ("maxCTAs", ctypes.c_int),
                ("nvlsCTAs", ctypes.c_int), ("cgaClusterSize", ctypes.c_int), ("algSelection", ctypes.c_char_p),
                ("forceAlgSelection", ctypes.c_int), ("CTAPolicy", ctypes.c_int),
                ("userProfilerTag", ctypes.c_uint64), ("launchCompletionEvent", ctypes.c_void_p)]


def config_for(kernel, max_ctas, event):
    option = ConfigExt(None, CAR_VENDOR, CAR_KERNEL_OPTION, kernel)
    config = CollConfig(ctypes.sizeof(CollConfig), API_MAGIC, 23203, ctypes.pointer(option), UNDEF_INT, max_ctas,
                        UNDEF_INT, UNDEF_INT, None, 1, UNDEF_INT, 0, event)
    return config, option  # the option must outlive the call


def main():
    rank, ranks, id_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    client.RANK = rank
    library = sys.argv[4] if len(sys.argv) > 4 else "libnccl.so.2"
    cuda = client.cuda_driver()
    cuda.cuEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
    cuda.cuEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    cuda.cuEventQuery.argtypes = [ctypes.c_void_p]
    cuda.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    cuda.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    cuda.cuStreamWaitValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    client.check(cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(handle), 0) == 0, "cuInit")
    client.check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle) == 0, "cuDevicePrimaryCtxRetain")
    client.check(cuda.cuCtxSetCurrent(context) == 0, "cuCtxSetCurrent")
    nccl = client.nccl_library(library)
    pointer = ctypes.c_void_p
    nccl.ncclAllReduceConfig.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                         pointer, pointer, ctypes.POINTER(CollConfig)]
    comm = ctypes.c_void_p()
    client.check(nccl.ncclCommInitRank(ctypes.byref(comm), ranks, client.share_unique_id(nccl, id_file), rank) == 0,
                 "ncclCommInitRank")
    stream, held, completion = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    client.check(cuda.cuStreamCreate(ctypes.byref(stream), 1) == 0 and cuda.cuStreamCreate(ctypes.byref(held), 1) == 0,
                 "cuStreamCreate")
    client.check(cuda.cuEventCreate(ctypes.byref(completion), EVENT_DISABLE_TIMING) == 0, "cuEventCreate")
    flag_host, flag_device = ctypes.c_void_p(), ctypes.c_uint64()
    client.check(cuda.cuMemHostAlloc(ctypes.byref(flag_host), 4, HOST_ALLOC_DEVICEMAP) == 0 and
                 cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(flag_device), flag_host, 0) == 0, "cuMemHostAlloc")
    flag = ctypes.cast(flag_host, ctypes.POINTER(ctypes.c_uint32))
    flag[0] = 0
    largest = max(client.SIZES)
    send, recv = ctypes.c_uint64(), ctypes.c_uint64()
    client.check(cuda.cuMemAlloc_v2(ctypes.byref(send), largest) == 0 and
                 cuda.cuMemAlloc_v2(ctypes.byref(recv), largest) == 0, "cuMemAlloc")

    expect = {"requested": 0, "too-large": 0, "1shot": 0, "2shot": 0}
    checks, wrong, unrecorded, call = 0, 0, 0, 0
    for nbytes in client.SIZES:
        count = nbytes // 4
        sums = [sum(column) for column in zip(*(client.pattern(r, 17) for r in range(ranks)))]
        expected = client.encode((sums * (count // 17 + 1))[:count], client.FLOAT32)
        client.check(cuda.cuMemcpyHtoDAsync_v2(send.value, client.encode(client.pattern(rank, count), client.FLOAT32),
                                               nbytes, stream) == 0, "upload")
        for kernel in KERNELS:
            config, option = config_for(kernel, 4 if call % 2 else UNDEF_INT, completion.value)
            call += 1
            if kernel == b"nccl":
                expect["requested"] += 1
            elif nbytes > LIMIT:
                expect["too-large"] += 1
            elif kernel != b"auto":
                expect[kernel.decode()] += 1
            client.check(cuda.cuMemsetD8Async(recv.value, 0xFF, nbytes, stream) == 0, "poison")
            # Pending until the flag reaches `call`: only a record by the call completes it now.
            client.check(cuda.cuStreamWaitValue32_v2(held, flag_device.value, call, WAIT_VALUE_GEQ) == 0 and
                         cuda.cuEventRecord(completion, held) == 0, "holding the event back")
            result = nccl.ncclAllReduceConfig(send.value, recv.value, count, client.FLOAT32, client.SUM, comm, stream,
                                              ctypes.byref(config))
            client.check(result == 0, f"ncclAllReduceConfig ({kernel.decode()}, {nbytes} bytes) -> {result}")
            client.check(cuda.cuStreamSynchronize(stream) == 0, "cuStreamSynchronize")
            recorded = cuda.cuEventQuery(completion)
            flag[0] = call  # lets the held record through
            if recorded != 0:
                unrecorded += 1  # NOT_READY: still the held record, the call did not record it
                print(f"rank {rank}/{ranks}: completion event not recorded ({kernel.decode()}, {nbytes} bytes)",
                      file=sys.stderr)
            got = ctypes.create_string_buffer(nbytes)
            client.check(cuda.cuMemcpyDtoH_v2(got, recv.value, nbytes) == 0, "download")
            checks += 1
            if got.raw != expected:
                wrong += 1
                print(f"rank {rank}/{ranks}: WRONG {kernel.decode()} {nbytes} bytes", file=sys.stderr)
    print(f"rank {rank}/{ranks}: expect requested={expect['requested']} too-large={expect['too-large']} "
          f"1shot>={expect['1shot']} 2shot>={expect['2shot']}", flush=True)
    client.check(nccl.ncclCommDestroy(comm) == 0, "ncclCommDestroy")
    status = "PASS" if wrong == 0 and unrecorded == 0 else "FAIL"
    print(f"rank {rank}/{ranks}: {status} ({checks} checks, {wrong} wrong, {unrecorded} events not recorded, "
          f"NCCL from {library})", flush=True)
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
