// The names that tie the front to what stands behind it (docs/design.md, "Three ways in").
// The front is an empty libnccl.so.2 whose DT_NEEDED are libnccl-car.so, then the real NCCL
// under a private name: a program that gets the front for NCCL finds our hooks first and
// every other name of the real library after them. The values come from shim/CMakeLists.txt,
// which builds the front with them; tools/nccl_car_cli/paths.py spells them again, and
// tests/cli/test_install_paths.py checks it against the built front. Plain C: the audit
// module has no C++ runtime.
#pragma once

// The front's second dependency: the real NCCL. A drop-in folder holds a link of this name
// to it; under LD_AUDIT the module answers a search for it with the real NCCL's path.
#ifndef CAR_FRONT_REAL_NCCL
#error "CAR_FRONT_REAL_NCCL comes from shim/CMakeLists.txt"
#endif
// The front's first dependency: the library itself.
#ifndef CAR_FRONT_OUR_LIBRARY
#error "CAR_FRONT_OUR_LIBRARY comes from shim/CMakeLists.txt"
#endif
// Where the front lives, from libnccl-car.so's folder (the build's and the install's).
#ifndef CAR_FRONT_FILE
#error "CAR_FRONT_FILE comes from shim/CMakeLists.txt"
#endif
