#include "lifecycle/let_go.h"

#include <memory>
#include <utility>

#include "lifecycle/setup_worker.h"

namespace car {

void dispose(Holdings held, const std::string& who, ImporterWait wait) {
  held.launcher.reset();
  BufferBlock::retire(std::move(held.block), who, wait == ImporterWait::Bounded);
}

void disposeInBackground(Holdings held, std::string who) {
  if (!held) return;
  auto kept = std::make_shared<Holdings>(std::move(held));
  runInBackground([kept, who = std::move(who)] { dispose(std::move(*kept), who, ImporterWait::None); });
}

}  // namespace car
