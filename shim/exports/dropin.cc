// libnccl.so.2 of the drop-in folder (shim/CMakeLists.txt): no code of its own. Its
// dependency on libnccl-car.so is the whole point: a program that loads this file by
// NCCL's name finds every nccl* function in our library, which then finds the real NCCL
// (exports/real_nccl.cc: it opens by path the first libnccl.so.2 that is not ours).
