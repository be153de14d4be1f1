// The System V release board itself (shim/ipc/release_board.h): the kernel's count of
// attachments is what the owner reads, so it is tested against the kernel, with fork()ed
// processes as peers.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "ipc/release_board.h"

using namespace car;

namespace {

// Waits (up to 5 s) until the owner counts `expected` importers.
bool importersBecome(const ReleaseBoard& board, int expected) {
  for (int i = 0; i < 5000; ++i) {
    if (board.importers() == expected) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A peer process: attaches the board, says so through a pipe, then waits for a byte on
// another pipe before exiting WITHOUT detaching (as a crash would).
struct PeerProcess {
  pid_t pid = -1;
  int toPeer = -1;
  PeerProcess(int boardId, std::uint64_t token) {
    int up[2], down[2];
    REQUIRE(pipe(up) == 0);
    REQUIRE(pipe(down) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::string problem;
      auto board = SysvReleaseBoard::attach(boardId, token, &problem);
      const char ok = board ? '1' : '0';
      [[maybe_unused]] ssize_t n = write(up[1], &ok, 1);
      char go = 0;
      n = read(down[0], &go, 1);
      _exit(0);  // no destructor: the kernel drops the attachment
    }
    close(up[1]);
    close(down[0]);
    char ok = 0;
    REQUIRE(read(up[0], &ok, 1) == 1);
    close(up[0]);
    attached = ok == '1';
    toPeer = down[1];
  }
  void exitNow() {
    const char go = 'x';
    [[maybe_unused]] ssize_t n = write(toPeer, &go, 1);
    close(toPeer);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  bool attached = false;
};

}  // namespace

TEST_CASE("release board: the owner counts attachments of this process and of others", "[board]") {
  std::string problem;
  auto owner = SysvReleaseBoard::create(&problem);
  REQUIRE(owner);
  CHECK(owner->importers() == 0);
  CHECK(owner->importersHere() == 0);

  auto sibling = SysvReleaseBoard::attach(owner->id(), owner->token(), &problem);  // a rank of this process
  REQUIRE(sibling);
  CHECK(owner->importers() == 1);
  CHECK(owner->importersHere() == 1);

  PeerProcess peer(owner->id(), owner->token());
  REQUIRE(peer.attached);
  CHECK(owner->importers() == 2);
  CHECK(owner->importersHere() == 1);

  sibling.reset();
  CHECK(owner->importers() == 1);
  CHECK(owner->importersHere() == 0);

  peer.exitNow();  // a peer that dies lets go without detaching itself
  CHECK(importersBecome(*owner, 0));
}

TEST_CASE("release board: once retired, a late importer backs off", "[board]") {
  std::string problem;
  auto owner = SysvReleaseBoard::create(&problem);
  REQUIRE(owner);
  owner->retire();
  CHECK_FALSE(SysvReleaseBoard::attach(owner->id(), owner->token(), &problem));
  CHECK(problem.find("already released") != std::string::npos);
  CHECK(owner->importers() == 0);  // its attachment went away with the refusal
}

TEST_CASE("release board: a fork()ed child does not count as an importer", "[board]") {
  std::string problem;
  auto owner = SysvReleaseBoard::create(&problem);
  REQUIRE(owner);
  auto importer = SysvReleaseBoard::attach(owner->id(), owner->token(), &problem);
  REQUIRE(importer);
  const pid_t child = fork();  // like a data-loader worker of a training process
  REQUIRE(child >= 0);
  if (child == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    _exit(0);
  }
  importer.reset();
  CHECK(owner->importers() == 0);  // while the child still lives
  int status = 0;
  waitpid(child, &status, 0);
}

TEST_CASE("release board: it vanishes with its last attachment", "[board]") {
  std::string problem;
  auto owner = SysvReleaseBoard::create(&problem);
  REQUIRE(owner);
  const int id = owner->id();
  const std::uint64_t token = owner->token();
  owner.reset();
  CHECK_FALSE(SysvReleaseBoard::attach(id, token, &problem));
}

TEST_CASE("release board: a page with another token is refused (its id went to another board)", "[board]") {
  std::string problem;
  auto owner = SysvReleaseBoard::create(&problem);
  REQUIRE(owner);
  auto other = SysvReleaseBoard::create(&problem);
  REQUIRE(other);
  CHECK(owner->token() != 0);
  CHECK(owner->token() != other->token());
  CHECK_FALSE(SysvReleaseBoard::attach(owner->id(), other->token(), &problem));
  CHECK(problem.find("another page") != std::string::npos);
  CHECK(owner->importers() == 0);  // its attachment went away with the refusal
  CHECK(SysvReleaseBoard::attach(owner->id(), owner->token(), &problem));
}
