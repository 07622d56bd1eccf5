// The largest-command counter (common/command_size_counter.hpp): the maximum per transport.
#include "iserkit/common/command_size_counter.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace iserkit {
namespace {

TEST(CommandSizeCounter, KeepsTheLargestPerTransport) {
  const auto tcp_before = largest_command_bytes(CommandTransport::tcp);
  note_command_bytes(CommandTransport::iser, 512u << 10);
  note_command_bytes(CommandTransport::iser, 4u << 20);
  note_command_bytes(CommandTransport::iser, 4096);  // smaller: the maximum stays
  EXPECT_EQ(largest_command_bytes(CommandTransport::iser), 4u << 20);
  EXPECT_EQ(largest_command_bytes(CommandTransport::tcp), tcp_before) << "iSER commands must not count as TCP";
  note_command_bytes(CommandTransport::tcp, (4u << 20) + 1);
  EXPECT_EQ(largest_command_bytes(CommandTransport::tcp), (4u << 20) + 1);
  EXPECT_EQ(largest_command_bytes(CommandTransport::iser), 4u << 20);
}

TEST(CommandSizeCounter, ConcurrentNotesKeepTheMaximum) {
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (std::uint64_t i = 1; i <= 10000; ++i) note_command_bytes(CommandTransport::iser, (64u << 20) + i * 4 + t);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(largest_command_bytes(CommandTransport::iser), (64u << 20) + 10000 * 4 + 3);
}

}  // namespace
}  // namespace iserkit
