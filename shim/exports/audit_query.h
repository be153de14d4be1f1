// The one name libnccl-car.so and libnccl-car-audit.so share. libnccl-car.so dlopens it to
// ask the audit module for the real NCCL; the module answers with that library's path
// (the one the program asked for, or NCCL_CAR_NCCL_LIB). Without the module no file has
// this name and the dlopen fails. Plain C: the audit module has no C++ runtime.
#pragma once

#define CAR_AUDIT_REAL_NCCL_QUERY "libnccl-car-audit-query-real-nccl.so"
