// DataInPipes (target/src/data_in_pipes.hpp) with real pipes: which READs get one, the bound per
// connection, how Data-In PDUs are pointed at a task's pipe (in order only), and which pipes are
// kept or closed when their task ends.
#include "data_in_pipes.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

namespace iserkit::target {
namespace {

constexpr std::size_t mib = 1u << 20;

// Puts `bytes` bytes into the pipe whose write end is `fd` (as the backend's splice would).
void fill(int fd, std::size_t bytes) {
  const std::vector<char> data(bytes, 'x');
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, data.data() + done, bytes - done);
    ASSERT_GT(n, 0);
    done += static_cast<std::size_t>(n);
  }
}

datamover::PduOut data_in(std::uint32_t itt, std::uint32_t offset, std::span<const std::byte> data) {
  return datamover::make_pdu(iscsi::DataIn{.itt = iscsi::Itt{itt}, .buffer_offset = offset}, data);
}

bool open_fd(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// A READ of 1 MiB whose pipe the backend filled, owned by task `itt`: the pipe's write end (-1:
// no pipe was given).
int spliced_read(DataInPipes& pipes, std::uint32_t itt) {
  const int fd = pipes.take(0, mib);
  if (fd < 0) return fd;
  fill(fd, mib);
  pipes.started(fd, iscsi::Itt{itt}, true, mib);
  return fd;
}

TEST(DataInPipes, SmallReadsAndReadsSpanningMorePagesThanAPipeHoldsTakeTheBufferPath) {
  DataInPipes pipes;
  EXPECT_EQ(pipes.take(0, DataInPipes::min_bytes - 512), -1);
  const int fd = pipes.take(0, mib);
  ASSERT_GE(fd, 0) << "pipe creation or F_SETPIPE_SZ to 1 MiB failed here";
  pipes.started(fd, iscsi::Itt{1}, false, 0);  // not spliced: straight back, empty, kept
  EXPECT_EQ(pipes.spare(), 1u);
  EXPECT_EQ(pipes.in_use(), 0u);
  // 1 MiB starting 512 bytes into a page touches 257 pages: one more than the pipe's slots.
  EXPECT_EQ(pipes.take(512, mib), -1);
  EXPECT_EQ(pipes.spare(), 1u);
}

TEST(DataInPipes, AtMostMaxPipesPerConnection) {
  DataInPipes pipes;
  std::vector<int> fds;
  for (std::size_t i = 0; i < DataInPipes::max_pipes; ++i) {
    fds.push_back(pipes.take(0, mib));
    ASSERT_GE(fds.back(), 0);
  }
  EXPECT_EQ(pipes.take(0, mib), -1);
  EXPECT_EQ(pipes.in_use(), DataInPipes::max_pipes);
  pipes.started(fds.back(), iscsi::Itt{9}, false, 0);
  EXPECT_GE(pipes.take(0, mib), 0);  // the one given back serves the next READ
}

TEST(DataInPipes, DataInPdusOfASplicedTaskTakeItsPipeInOrderOthersAreLeftAlone) {
  DataInPipes pipes;
  ASSERT_GE(spliced_read(pipes, 7), 0);
  EXPECT_EQ(pipes.in_use(), 1u);
  const std::vector<std::byte> buffer(mib);
  const auto half = std::span<const std::byte>(buffer).first(mib / 2);
  std::vector<datamover::PduOut> pdus;
  pdus.push_back(data_in(7, 0, half));
  pdus.push_back(data_in(8, 0, half));  // another task's: not spliced
  pdus.push_back(data_in(7, mib / 2, half));
  ASSERT_TRUE(pipes.mark(pdus));
  EXPECT_GE(pdus[0].splice_from, 0);
  EXPECT_EQ(pdus[1].splice_from, -1);
  EXPECT_EQ(pdus[2].splice_from, pdus[0].splice_from);
  // The pipe holds no more: one more Data-In of task 7 is refused, as is one out of order.
  std::vector<datamover::PduOut> more;
  more.push_back(data_in(7, mib, half));
  EXPECT_FALSE(pipes.mark(more));
}

TEST(DataInPipes, ADataInAtAnotherOffsetIsRefused) {
  DataInPipes pipes;
  ASSERT_GE(spliced_read(pipes, 7), 0);
  const std::vector<std::byte> buffer(mib / 2);
  std::vector<datamover::PduOut> pdus;
  pdus.push_back(data_in(7, mib / 2, buffer));
  EXPECT_FALSE(pipes.mark(pdus));
}

TEST(DataInPipes, AnEmptiedPipeIsKeptAPipeWithBytesLeftIsClosed) {
  DataInPipes pipes;
  const int sent = spliced_read(pipes, 1);
  const int aborted = spliced_read(pipes, 2);
  ASSERT_GE(sent, 0);
  ASSERT_GE(aborted, 0);
  // Task 1's bytes left (as the datamover's splice takes them); task 2 was aborted.
  const std::vector<std::byte> buffer(mib);
  std::vector<datamover::PduOut> pdus;
  pdus.push_back(data_in(1, 0, buffer));
  ASSERT_TRUE(pipes.mark(pdus));
  std::vector<char> sink(mib);
  std::size_t drained = 0;
  while (drained < mib) {
    const ssize_t n = ::read(pdus[0].splice_from, sink.data(), mib - drained);
    ASSERT_GT(n, 0);
    drained += static_cast<std::size_t>(n);
  }
  pipes.end(iscsi::Itt{1});
  pipes.end(iscsi::Itt{2});
  pipes.end(iscsi::Itt{3});  // no pipe: nothing happens
  EXPECT_EQ(pipes.in_use(), 0u);
  EXPECT_EQ(pipes.spare(), 1u);
  EXPECT_TRUE(open_fd(sent));
  EXPECT_FALSE(open_fd(aborted));
}

TEST(DataInPipes, ANewTaskWithTheITTOfOneThatNeverEndedDropsTheOldPipe) {
  DataInPipes pipes;
  const int old_fd = spliced_read(pipes, 5);
  ASSERT_GE(old_fd, 0);
  const int new_fd = spliced_read(pipes, 5);
  ASSERT_GE(new_fd, 0);
  EXPECT_EQ(pipes.in_use(), 1u);
  EXPECT_FALSE(open_fd(old_fd));
  EXPECT_TRUE(open_fd(new_fd));
}

}  // namespace
}  // namespace iserkit::target
