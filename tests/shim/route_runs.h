// The ways libnccl-car.so gets into a program, as the environment of a test's child process:
//   Preload: LD_PRELOAD=libnccl-car.so (programs linked against libnccl.so.2);
//   Dropin:  a drop-in folder that `nccl-car dropin` made for the NCCL of the run (its
//            libnccl.so.2 is the front: libnccl-car.so, then that NCCL), first on LD_LIBRARY_PATH;
//   Audit:   LD_AUDIT=libnccl-car-audit.so;
//   PreloadAndAudit: both at once.
// The stand-in NCCL's folder follows on LD_LIBRARY_PATH, where a program that asks for
// libnccl.so.2 by name finds it (as it would find the real one).
#pragma once

#include <string>
#include <vector>

#include "child_process.h"

namespace shimtest {

enum class Route { Preload, Dropin, Audit, PreloadAndAudit };

const char* routeName(Route route);

// The folder a library is in.
std::string folderOf(const std::string& path);

// A copy of the stand-in in a folder of its own (made once, removed at exit): a second NCCL
// library file.
std::string standinCopy();

// A drop-in folder for the real NCCL `real`, made once by `nccl-car dropin` (removed at exit).
std::string dropinFolderFor(const std::string& real);

// `program args...` through `route`; `ncclFolder` (its libnccl.so.2) replaces the stand-in's.
ChildResult runThrough(Route route, const std::string& program, const std::vector<std::string>& args,
                       const std::vector<std::string>& env = {}, const std::string& ncclFolder = "");

}  // namespace shimtest
