// Who may still touch a rank's buffer block. CUDA calls freeing an exported allocation
// before every importer closed its mapping undefined, and after an abort a peer's kernel
// may still write into our block; so the owner frees it only when no importer is left.
//
// The board is a System V shared-memory page the owner creates at set-up; its id travels
// in the handshake record. Every rank that maps the block (by IPC in another process, by
// pointer in this one) attaches the board first, and detaches only after it closed its
// mapping and its own kernels ended. The kernel counts attachments, and a process that
// dies loses its own, so "attachments besides the owner's" is exactly "importers left".
// System V rather than POSIX shared memory: it lives in the IPC namespace, which the
// handshake already requires peers in other processes to share (POSIX segments live in a
// mounted /dev/shm, which containers may not share); it needs no name and no file, and,
// marked for removal at once, it vanishes with its last attachment, even after a crash.
// The same page carries what the set-up publishes for the peers (shim/ipc/board_page.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ipc/board_page.h"

namespace car {

// The owner's view, as the release logic needs it (faked in the CPU tests).
class ReleaseBoard {
 public:
  virtual ~ReleaseBoard() = default;
  // From now on an importer that attaches sees it and backs off without mapping.
  virtual void retire() = 0;
  // Attachments besides the owner's: in total, and of this process. -1: cannot tell.
  virtual int importers() const = 0;
  virtual int importersHere() const = 0;
};

// One attachment of a board page: the owner's (create) or an importer's (attach). The
// destructor detaches.
class SysvReleaseBoard final : public ReleaseBoard {
 public:
  // A new board with a fresh random token, already marked for removal: it lives as long as
  // someone is attached.
  static std::unique_ptr<SysvReleaseBoard> create(std::string* problem);
  // Attaches the owner's board; fails if it is gone, holds another token (the id went to
  // another page), or is retired (the owner is releasing).
  static std::unique_ptr<SysvReleaseBoard> attach(int id, std::uint64_t token, std::string* problem);
  ~SysvReleaseBoard() override;
  SysvReleaseBoard(const SysvReleaseBoard&) = delete;
  SysvReleaseBoard& operator=(const SysvReleaseBoard&) = delete;

  int id() const { return id_; }
  std::uint64_t token() const { return page().token; }
  // Still the owner's: its block is not being released. Checked again before a block is mapped.
  bool retired() const { return page().retired.load(std::memory_order_seq_cst) != 0; }
  BoardPage& page() const { return *static_cast<BoardPage*>(page_); }
  void retire() override;
  int importers() const override;
  int importersHere() const override;

 private:
  SysvReleaseBoard(int id, void* page);
  int id_;
  void* page_;
};

}  // namespace car
