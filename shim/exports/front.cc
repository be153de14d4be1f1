// The front (shim/CMakeLists.txt; front_names.h): an empty libnccl.so.2. Its dependencies,
// libnccl-car.so and then the real NCCL under a private name, are the whole point: a program
// that gets this file for NCCL finds our hooks first and every other function of the real
// library after them. The same empty file, under the private name, stands for the real NCCL
// when the front is linked.
