"""A Python program that reaches NCCL only through ctypes, as vLLM's and SGLang's PyNccl do:

    python3 ctypes_client.py LIBRARY

LIBRARY is a name (libnccl.so.2) or a path. Like the C drivers (driver_steps.h), it writes
"@ <label> <expected call line>" to $STANDIN_NCCL_LOG before each call and
"<label> result=<rc>" to stdout after it, so that the shim tests compare what it passed and
got back with what the stand-in NCCL recorded. Standard library only."""

import ctypes
import os
import sys

FLOAT32, SUM, INVALID_USAGE = 7, 0, 5
FAKE_STREAM = 0x5A5A000  # as driver_common.h: not null, never touched


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_ubyte * 128)]


def marker(label, line):
    path = os.environ.get("STANDIN_NCCL_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"@ {label} {line}\n")


def step(label, line, call):
    marker(label, line)
    result = call()
    print(f"{label} result={result}", flush=True)
    return result


def address(thing):
    return hex(ctypes.addressof(thing))


def declare(nccl):
    pointer = ctypes.c_void_p
    nccl.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
    nccl.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(pointer), ctypes.c_int, UniqueId, ctypes.c_int]
    collective = [pointer, pointer, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, pointer, pointer]
    nccl.ncclAllReduce.argtypes = collective    # ..., datatype, op, comm, stream
    nccl.ncclBroadcast.argtypes = collective    # ..., datatype, root, comm, stream
    nccl.ncclCommRegister.argtypes = [pointer, pointer, ctypes.c_size_t, ctypes.POINTER(pointer)]
    nccl.ncclCommDestroy.argtypes = [pointer]
    # Two functions nccl.h lacks (NCCL's device API, tests/shim/standin_device_api.h).
    nccl.ncclDevCommCreate.argtypes = [pointer, pointer, pointer]
    nccl.ncclDevCommDestroy.argtypes = [pointer, pointer]
    nccl.ncclGetErrorString.argtypes = [ctypes.c_int]
    nccl.ncclGetErrorString.restype = ctypes.c_char_p


def main():
    nccl = ctypes.CDLL(sys.argv[1])
    declare(nccl)
    version = ctypes.c_int(-1)
    step("version", f"ncclGetVersion version={address(version)}",
         lambda: nccl.ncclGetVersion(ctypes.byref(version)))
    print(f"version value={version.value}")

    uid = UniqueId()
    step("uid", f"ncclGetUniqueId uniqueId={address(uid)}", lambda: nccl.ncclGetUniqueId(ctypes.byref(uid)))
    comm = ctypes.c_void_p()
    step("init", f"ncclCommInitRank comm={address(comm)} nranks=1 commId={bytes(uid.internal).hex()} rank=0",
         lambda: nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0))
    print(f"init made={hex(comm.value or 0)}")

    send, recv = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
    buffers = f"sendbuff={address(send)} recvbuff={address(recv)} count=1024 datatype={FLOAT32}"
    tail = f"comm={hex(comm.value)} stream={hex(FAKE_STREAM)}"
    step("ar", f"ncclAllReduce {buffers} op={SUM} {tail}",
         lambda: nccl.ncclAllReduce(send, recv, 1024, FLOAT32, SUM, comm, FAKE_STREAM))
    dev_comm = ctypes.create_string_buffer(64)
    step("devcreate", f"ncclDevCommCreate comm={hex(comm.value)} reqs={address(send)} devcomm={address(dev_comm)}",
         lambda: nccl.ncclDevCommCreate(comm, send, dev_comm))
    step("devdestroy", f"ncclDevCommDestroy comm={hex(comm.value)} devcomm={address(dev_comm)}",
         lambda: nccl.ncclDevCommDestroy(comm, dev_comm))
    step("bcast", f"ncclBroadcast {buffers} root=0 {tail}",
         lambda: nccl.ncclBroadcast(send, recv, 1024, FLOAT32, 0, comm, FAKE_STREAM))
    handle = ctypes.c_void_p()
    step("register", f"ncclCommRegister arg0={hex(comm.value)} arg1={address(send)} arg2=4096 "
                     f"arg3={address(handle)}",
         lambda: nccl.ncclCommRegister(comm, send, 4096, ctypes.byref(handle)))

    marker("errstr", f"ncclGetErrorString code={INVALID_USAGE}")
    text = nccl.ncclGetErrorString(INVALID_USAGE).decode().replace(" ", "_")
    print(f"errstr value={text}")
    step("destroy", f"ncclCommDestroy comm={hex(comm.value)}", lambda: nccl.ncclCommDestroy(comm))
    print("done")


if __name__ == "__main__":
    main()
