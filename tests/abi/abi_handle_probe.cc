// abi_handle_probe LIB NAMES: dlopens LIB (a name or a path) as a program that loads NCCL
// itself does, looks every name of the file NAMES up on that handle (one a line; '#' lines
// are comments) and prints "<name> <file that defines it>" or "<name> MISSING". Exit 4 when
// LIB does not load. tests/shim/test_shim_abi.cc runs it through every way in.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: abi_handle_probe LIB NAMES\n");
    return 2;
  }
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("cannot load %s: %s\n", argv[1], dlerror());
    return 4;
  }
  std::ifstream names(argv[2]);
  for (std::string name; std::getline(names, name);) {
    if (name.empty() || name[0] == '#') continue;
    void* symbol = dlsym(handle, name.c_str());
    Dl_info info{};
    char file[PATH_MAX];
    if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr ||
        realpath(info.dli_fname, file) == nullptr) {
      std::printf("%s MISSING\n", name.c_str());
    } else {
      std::printf("%s %s\n", name.c_str(), file);
    }
  }
  return 0;
}
