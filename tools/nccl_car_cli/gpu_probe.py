"""GPUs, peer access and NVLink, asked of the driver through ctypes (no CUDA toolkit).

CUDA driver API (libcuda.so.1) for the devices and P2P; NVML (libnvidia-ml.so.1) for
NVLink. Either may be missing: the report then says why instead of failing."""

import ctypes

_CUDA_SUCCESS = 0
_ATTRIBUTE_CC_MAJOR = 75
_ATTRIBUTE_CC_MINOR = 76
_NVML_SUCCESS = 0
_NVML_P2P_CAPS_INDEX_NVLINK = 2
_NVML_P2P_STATUS_OK = 0


class _DriverError(Exception):
    pass


def _cuda_error_name(cuda, code):
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(code, ctypes.byref(name)) == _CUDA_SUCCESS and name.value:
        return name.value.decode()
    return f"CUresult {code}"


def _check(cuda, code, what):
    if code != _CUDA_SUCCESS:
        raise _DriverError(f"{what} failed: {_cuda_error_name(cuda, code)}")


def _device_facts(cuda, ordinal):
    device = ctypes.c_int()
    _check(cuda, cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    name = ctypes.create_string_buffer(256)
    _check(cuda, cuda.cuDeviceGetName(name, len(name), device), "cuDeviceGetName")
    bus_id = ctypes.create_string_buffer(64)
    _check(cuda, cuda.cuDeviceGetPCIBusId(bus_id, len(bus_id), device), "cuDeviceGetPCIBusId")
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(cuda, cuda.cuDeviceGetAttribute(ctypes.byref(major), _ATTRIBUTE_CC_MAJOR, device),
           "cuDeviceGetAttribute")
    _check(cuda, cuda.cuDeviceGetAttribute(ctypes.byref(minor), _ATTRIBUTE_CC_MINOR, device),
           "cuDeviceGetAttribute")
    memory = ctypes.c_size_t()
    _check(cuda, cuda.cuDeviceTotalMem_v2(ctypes.byref(memory), device), "cuDeviceTotalMem")
    return device, {"index": ordinal, "name": name.value.decode(errors="replace"),
                    "pci_bus_id": bus_id.value.decode(),
                    "compute_capability": f"{major.value}.{minor.value}", "memory_bytes": memory.value}


def _peer_matrix(cuda, devices):
    matrix = []
    for i, first in enumerate(devices):
        row = []
        for j, second in enumerate(devices):
            if i == j:
                row.append(True)
                continue
            can = ctypes.c_int()
            _check(cuda, cuda.cuDeviceCanAccessPeer(ctypes.byref(can), first, second),
                   "cuDeviceCanAccessPeer")
            row.append(bool(can.value))
        matrix.append(row)
    return matrix


def _nvlink_matrix(bus_ids):
    """NVLink between each pair (a GPU with itself counts as connected), or an error."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None, "libnvidia-ml.so.1 not found"
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    nvml.nvmlDeviceGetP2PStatus.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_int)]
    code = nvml.nvmlInit_v2()
    if code != _NVML_SUCCESS:
        return None, f"nvmlInit failed: {nvml.nvmlErrorString(code).decode()}"
    try:
        handles = []
        for bus_id in bus_ids:
            handle = ctypes.c_void_p()
            code = nvml.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(handle))
            if code != _NVML_SUCCESS:
                return None, (f"nvmlDeviceGetHandleByPciBusId({bus_id}) failed: "
                              f"{nvml.nvmlErrorString(code).decode()}")
            handles.append(handle)
        matrix = []
        for i, first in enumerate(handles):
            row = []
            for j, second in enumerate(handles):
                if i == j:
                    row.append(True)
                    continue
                status = ctypes.c_int()
                code = nvml.nvmlDeviceGetP2PStatus(first, second, _NVML_P2P_CAPS_INDEX_NVLINK,
                                                   ctypes.byref(status))
                if code != _NVML_SUCCESS:
                    return None, (f"nvmlDeviceGetP2PStatus failed: "
                                  f"{nvml.nvmlErrorString(code).decode()}")
                row.append(status.value == _NVML_P2P_STATUS_OK)
            matrix.append(row)
        return matrix, None
    finally:
        nvml.nvmlShutdown()


def probe_gpus():
    """Returns a dict:
        driver_error: None, or why no GPU could be listed (no driver, no device, ...)
        driver_version: "12.8" or None
        gpus: [{index, name, pci_bus_id, compute_capability, memory_bytes}]
        p2p: matrix of bools (gpus x gpus), or None
        nvlink: matrix of bools, or None when unknown; nvlink_error says why."""
    report = {"driver_error": None, "driver_version": None, "gpus": [], "p2p": None,
              "nvlink": None, "nvlink_error": None}
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        report["driver_error"] = "libcuda.so.1 not found: no NVIDIA driver on this machine"
        return report
    try:
        _check(cuda, cuda.cuInit(0), "cuInit")
        version = ctypes.c_int()
        _check(cuda, cuda.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
        report["driver_version"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
        count = ctypes.c_int()
        _check(cuda, cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        devices = []
        for ordinal in range(count.value):
            device, facts = _device_facts(cuda, ordinal)
            devices.append(device)
            report["gpus"].append(facts)
        report["p2p"] = _peer_matrix(cuda, devices)
    except _DriverError as error:
        report["driver_error"] = str(error)
        return report
    if report["gpus"]:
        report["nvlink"], report["nvlink_error"] = _nvlink_matrix(
            [gpu["pci_bus_id"] for gpu in report["gpus"]])
    return report


def visible_gpu_count():
    """GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES applies); 0 without a driver."""
    return len(probe_gpus()["gpus"])
