// The /proc parsers behind the process_* metrics (common/process_stats.hpp; proc(5)), on fixed
// samples, and one live reading of this test process.
#include "iserkit/common/process_stats.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <limits>

#include <gtest/gtest.h>

namespace iserkit {
namespace {

// A real /proc/self/stat line (Linux 6.1), but for a command name holding ") (" and spaces.
constexpr std::string_view stat_sample =
    "4242 (iserkit ) (nbd) S 1 4242 4242 0 -1 4194560 2103 0 0 0 157 43 0 0 20 0 3 0 889211 "
    "318767104 2817 18446744073709551615 1 1 0 0 0 0 0 4096 17638 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

TEST(ProcStat, FieldsAfterTheLastParenthesis) {
  const auto s = parse_proc_stat(stat_sample);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->user_ticks, 157u);
  EXPECT_EQ(s->system_ticks, 43u);
  EXPECT_EQ(s->start_ticks, 889211u);
  EXPECT_EQ(s->virtual_bytes, 318767104u);
  EXPECT_EQ(s->resident_pages, 2817u);
}

TEST(ProcStat, MalformedTextIsRefused) {
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("4242 no parenthesis S 1 2 3"));
  EXPECT_FALSE(parse_proc_stat("4242 (short) S 1 2 3 4 5 6 7 8 9 10 11 12"));
  std::string bad(stat_sample);
  bad.replace(bad.find(" 157 "), 5, " x57 ");
  EXPECT_FALSE(parse_proc_stat(bad));
}

TEST(ProcBootTime, BtimeLine) {
  const auto b = parse_boot_time("cpu  10 0 20 300 0 0 0 0 0 0\nintr 1 2 3\nctxt 99\nbtime 1764316800\nprocesses 7\n");
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, 1764316800u);
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\nctxt 99\n"));
  EXPECT_FALSE(parse_boot_time("btime soon\n"));
}

TEST(ProcLimits, SoftMaxOpenFiles) {
  constexpr std::string_view limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            1024                 524288               files     \n"
      "Max locked memory         8388608              8388608              bytes     \n";
  const auto n = parse_max_open_files(limits);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1024u);
  const auto unlimited = parse_max_open_files("Max open files            unlimited            unlimited            files\n");
  ASSERT_TRUE(unlimited);
  EXPECT_EQ(*unlimited, std::numeric_limits<std::uint64_t>::max());
  EXPECT_FALSE(parse_max_open_files("Max cpu time unlimited unlimited seconds\n"));
  EXPECT_FALSE(parse_max_open_files("Max open files many\n"));
}

TEST(ProcessStats, LiveReadingOfThisProcess) {
  const auto first = read_process_stats();
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_GT(first->resident_memory_bytes, 0u);
  EXPECT_GE(first->virtual_memory_bytes, first->resident_memory_bytes);
  EXPECT_GE(first->open_fds, 3u);  // stdin, stdout, stderr at least
  EXPECT_GE(first->max_fds, first->open_fds);
  const double now = static_cast<double>(::time(nullptr));
  EXPECT_LE(first->start_time_seconds, now + 2);
  EXPECT_GT(first->start_time_seconds, now - 24 * 3600.0) << "started within the last day";
  // One more descriptor is seen as one more.
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const auto second = read_process_stats();
  ::close(fd);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->open_fds, first->open_fds + 1);
  // CPU time only grows; burn some to see it move.
  volatile std::uint64_t sink = 0;
  double cpu = second->cpu_seconds;
  for (int round = 0; round < 200 && cpu <= first->cpu_seconds; ++round) {
    for (std::uint64_t i = 0; i < 5'000'000; ++i) sink = sink + i;
    cpu = read_process_stats()->cpu_seconds;
  }
  EXPECT_GT(cpu, first->cpu_seconds);
}

}  // namespace
}  // namespace iserkit
