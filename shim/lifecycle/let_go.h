// What a communicator let go of (Holdings, lifecycle/communicator.h), disposed of outside its
// lock: the launcher first (none of its kernels may still run by then), then the block
// retired (shim/ipc/buffer_block.h: our mappings of the peers closed, our memory back to the
// pool once no peer maps it). On a program's thread only at a release, where NCCL's own
// destroy waits for the device too; everywhere else on the set-up worker.
#pragma once

#include <string>

#include "lifecycle/communicator.h"

namespace car {

enum class ImporterWait {
  Bounded,  // a release: wait a little for importers in other processes (kImporterWaitSeconds)
  None,     // the set-up worker: what is still mapped is kept, and swept into the pool later
};

void dispose(Holdings held, const std::string& who, ImporterWait wait);

// From a program's call outside a release (the agreement said never): on the set-up worker.
void disposeInBackground(Holdings held, std::string who);

}  // namespace car
