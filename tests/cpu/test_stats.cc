#include <catch2/catch.hpp>

#include "stats.h"

using namespace car;

TEST_CASE("stats summary counts taken calls by kernel and forwarded ones by reason", "[stats]") {
  CallStats stats;
  CHECK(stats.summary() == "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 0");
  stats.countTaken(Algorithm::OneStage, 4096);
  stats.countTaken(Algorithm::OneStage, 16);
  stats.countTaken(Algorithm::TwoStage, 1 << 20);
  stats.countTaken(Algorithm::OneShotPush, 2);
  stats.countTaken(Algorithm::ReduceScatterPush, 64);
  stats.countForwarded(ForwardReason::TooLarge);
  stats.countForwarded(ForwardReason::TooLarge);
  stats.countForwarded(ForwardReason::Op);
  CHECK(stats.taken(Algorithm::OneStage) == 2);
  CHECK(stats.taken(Algorithm::TwoStage) == 1);
  CHECK(stats.taken(Algorithm::OneShotPush) == 1);
  CHECK(stats.taken(Algorithm::TwoShotPush) == 0);
  CHECK(stats.taken(Algorithm::ReduceScatterPush) == 1);
  CHECK(stats.takenBytes() == 4096 + 16 + (1 << 20) + 2 + 64);
  CHECK(stats.summary() ==
        "taken 1shot=1 2shot=0 allgather=0 reducescatter=1 1stage=2 2stage=1 (1052754 bytes) forwarded 3 (op=1 "
        "too-large=2)");
}
