// The target's fast path (issue 23 item 4): BlockBackend::start_transfer() and
// ScsiDispatcher::start_media_io(). A read or write through it moves the same bytes as read()/
// write() and execute(), completes exactly once from the loop (never from inside the start call),
// maps backend errors as execute() does, and stays off (unsupported, nothing done) where the slow
// path must decide: other opcodes, zero blocks, a memory backend, a write whose range another
// write holds. On tmpfs the uring backend answers at once (TransferStart::done).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/uring_ring.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::Status;

constexpr std::uint64_t lun_bytes = 8u << 20;

/// A temporary LUN file in `dir` (removed at the end).
struct TempLun : test::TempLun {
  explicit TempLun(const char* dir) : test::TempLun(dir, lun_bytes, "mediaio") {}
};

std::string skip_reason(const char* dir) { return test::uring_file_skip_reason(dir); }

/// Records transferred(): how often, with what, and whether from inside start_transfer().
struct RecordingTransfer final : BackendTransfer {
  int calls = 0;
  bool inside_start = false;
  bool called_inside_start = false;
  Result<void> got;
  void transferred(Result<void> r) noexcept override {
    ++calls;
    called_inside_start = called_inside_start || inside_start;
    got = std::move(r);
  }
};

/// Records complete().
struct RecordingIo final : MediaIo {
  int calls = 0;
  ScsiOutcome got;
  void complete(ScsiOutcome o) noexcept override {
    ++calls;
    got = o;
  }
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

class StartTransfer : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (auto why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(lun_.path.empty());
    auto b = open_uring_backend({.path = lun_.path});
    ASSERT_TRUE(b);
    backend_ = *b;
  }
  bool inline_io() const { return std::string(GetParam()) == "/dev/shm"; }
  /// Starts `t` and runs the loop until it ended; returns its result.
  Result<void> transfer(RecordingTransfer& t) {
    t.executor = ctx_.get_executor();
    t.inside_start = true;
    const TransferStart s = backend_->start_transfer(t);
    t.inside_start = false;
    EXPECT_NE(s, TransferStart::unsupported);
    EXPECT_EQ(s, inline_io() ? TransferStart::done : TransferStart::started);
    if (s == TransferStart::done) {
      EXPECT_EQ(t.calls, 0) << "transferred() must not run after done";
      return t.result;
    }
    ctx_.restart();
    for (int i = 0; i < 500 && t.calls == 0; ++i) ctx_.run_for(std::chrono::milliseconds(10));
    EXPECT_EQ(t.calls, 1);
    EXPECT_FALSE(t.called_inside_start);
    return t.got;
  }

  TempLun lun_{GetParam()};
  asio::io_context ctx_;
  std::shared_ptr<BlockBackend> backend_;
};

TEST_P(StartTransfer, MovesTheSameBytesAsReadAndWrite) {
  // 4 KiB aligned (O_DIRECT where the file system has it), an odd 512-byte range from an
  // unaligned buffer (buffered), and 2 MiB.
  struct Case { std::uint64_t offset; std::size_t length; std::size_t shift; };
  for (const Case c : {Case{0, 4096, 0}, Case{512 * 7, 512 * 3, 1}, Case{1u << 20, 2u << 20, 0}}) {
    std::vector<std::byte> storage(c.length + 4096 + c.shift);
    auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 4095) / 4096 * 4096);
    std::byte* buffer = base + c.shift;
    const auto data = pattern(c.length, static_cast<unsigned>(c.offset));
    std::memcpy(buffer, data.data(), c.length);
    RecordingTransfer w;
    w.writing = true;
    w.offset_bytes = c.offset;
    w.data = buffer;
    w.length_bytes = c.length;
    ASSERT_TRUE(transfer(w)) << "write at " << c.offset;
    // read() sees what the fast write wrote…
    std::vector<std::byte> back(c.length);
    ASSERT_TRUE(test::run(ctx_, backend_->read(c.offset, back)));
    EXPECT_EQ(back, data);
    // …and a fast read sees what write() wrote.
    const auto other = pattern(c.length, 99);
    ASSERT_TRUE(test::run(ctx_, backend_->write(c.offset, other, Fua::yes)));
    std::memset(buffer, 0, c.length);
    RecordingTransfer r;
    r.offset_bytes = c.offset;
    r.data = buffer;
    r.length_bytes = c.length;
    ASSERT_TRUE(transfer(r));
    EXPECT_EQ(std::memcmp(buffer, other.data(), c.length), 0) << "read at " << c.offset;
  }
}

TEST_P(StartTransfer, AWriteToAReadOnlyBackendFailsWithErofs) {
  auto ro = open_uring_backend({.path = lun_.path, .read_only = true});
  ASSERT_TRUE(ro);
  backend_ = *ro;
  std::vector<std::byte> buffer(4096);
  RecordingTransfer w;
  w.writing = true;
  w.data = buffer.data();
  w.length_bytes = buffer.size();
  w.executor = ctx_.get_executor();
  ASSERT_EQ(backend_->start_transfer(w), TransferStart::done);
  ASSERT_FALSE(w.result);
  EXPECT_EQ(w.result.error(), std::error_code(EROFS, std::generic_category()));
}

// A read given a pipe (BackendTransfer::splice_pipe, the zero-copy READ Data-In) puts the bytes
// into the pipe where the page cache serves the file — tmpfs (inline), or a file opened without
// O_DIRECT (an io_uring splice) — and leaves the buffer alone; a file also read with O_DIRECT
// ignores the pipe (its bytes go to the buffer, spliced stays false).
TEST_P(StartTransfer, AReadGivenAPipeSplicesOnlyWhereThePageCacheServesTheFile) {
  constexpr std::size_t n = 1u << 20;
  const auto data = pattern(n, 7);
  ASSERT_TRUE(test::run(ctx_, backend_->write(1u << 20, data, Fua::no)));
  for (const bool direct : {false, true}) {
    auto b = open_uring_backend({.path = lun_.path, .use_direct_io = direct});
    ASSERT_TRUE(b);
    backend_ = *b;
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    ASSERT_GE(::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(n)), static_cast<int>(n));
    std::vector<std::byte> buffer(n, std::byte{0xee});
    RecordingTransfer r;
    r.offset_bytes = 1u << 20;
    r.data = buffer.data();
    r.length_bytes = n;
    r.splice_pipe = fds[1];
    ASSERT_TRUE(transfer(r));
    const bool want_splice = inline_io() || !direct;
    EXPECT_EQ(r.spliced, want_splice) << "direct=" << direct;
    std::vector<std::byte> out(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t k = ::read(fds[0], out.data() + got, n - got);
      if (k <= 0) break;
      got += static_cast<std::size_t>(k);
    }
    if (want_splice) {
      EXPECT_EQ(got, n);
      EXPECT_EQ(out, data) << "the pipe does not hold the range's bytes";
      EXPECT_EQ(buffer, std::vector<std::byte>(n, std::byte{0xee})) << "the buffer was written too";
    } else {
      EXPECT_EQ(got, 0u) << "the pipe got bytes although the file is read with O_DIRECT";
      EXPECT_EQ(buffer, data);
    }
    ::close(fds[0]);
    ::close(fds[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(Dirs, StartTransfer, ::testing::Values("/var/tmp", "/dev/shm"));

TEST(StartTransferMemory, TheMemoryBackendHasNoFastPath) {
  auto b = make_memory_backend({.size_bytes = lun_bytes});
  std::vector<std::byte> buffer(4096);
  RecordingTransfer t;
  t.data = buffer.data();
  t.length_bytes = buffer.size();
  EXPECT_EQ(b->start_transfer(t), TransferStart::unsupported);
  EXPECT_EQ(t.calls, 0);
}

class StartMediaIo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = skip_reason("/var/tmp"); !why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(lun_.path.empty());
    auto b = open_uring_backend({.path = lun_.path});
    ASSERT_TRUE(b);
    ASSERT_TRUE(dispatcher_.add_logical_unit(0, std::make_shared<LogicalUnit>(*b, LogicalUnitOptions{})));
  }
  CommandPlan plan(const scsi::Cdb& cdb) { return dispatcher_.plan(Lun::from_index(0), cdb.span()); }
  MediaIoStart start(const scsi::Cdb& cdb, ByteSpan data, RecordingIo& io) {
    io.executor = ctx_.get_executor();
    return dispatcher_.start_media_io(Lun::from_index(0), plan(cdb), data, io);
  }
  void wait(RecordingIo& io) {
    ctx_.restart();
    for (int i = 0; i < 500 && io.calls == 0; ++i) ctx_.run_for(std::chrono::milliseconds(10));
    EXPECT_EQ(io.calls, 1);
  }

  TempLun lun_{"/var/tmp"};
  asio::io_context ctx_;
  ScsiDispatcher dispatcher_;
};

TEST_F(StartMediaIo, AWriteThenAReadRoundTripWithExecutesOutcomes) {
  const auto data = pattern(8 * 512, 5);
  std::vector<std::byte> out(data);
  RecordingIo w;
  ASSERT_EQ(start(scsi::write16({.lba = 64, .blocks = 8}), out, w), MediaIoStart::started);
  EXPECT_EQ(w.calls, 0) << "complete() ran inside start_media_io()";
  wait(w);
  EXPECT_EQ(w.got.status, Status::good);
  EXPECT_EQ(w.got.data_length_bytes, 0u);
  std::vector<std::byte> in(8 * 512);
  RecordingIo r;
  ASSERT_EQ(start(*scsi::read10({.lba = 64, .blocks = 8}), in, r), MediaIoStart::started);
  wait(r);
  EXPECT_EQ(r.got.status, Status::good);
  EXPECT_EQ(r.got.data_length_bytes, 8u * 512);
  EXPECT_EQ(in, data);
  // The slow path reads the same.
  const auto slow = test::run_command(ctx_, dispatcher_, NexusId{}, Lun::from_index(0), scsi::read16({.lba = 64, .blocks = 8}), {});
  EXPECT_EQ(slow.outcome.status, Status::good);
  EXPECT_EQ(slow.data_in, data);
}

TEST_F(StartMediaIo, OtherCommandsAndZeroBlocksAreLeftToExecute) {
  std::vector<std::byte> buffer(4096);
  RecordingIo io;
  EXPECT_EQ(start(scsi::inquiry({}), buffer, io), MediaIoStart::unsupported);
  EXPECT_EQ(start(scsi::test_unit_ready(), {}, io), MediaIoStart::unsupported);
  EXPECT_EQ(start(scsi::read16({.lba = 0, .blocks = 0}), {}, io), MediaIoStart::unsupported);
  // Out of range: plan() rejected it; execute() answers.
  EXPECT_EQ(start(scsi::read16({.lba = lun_bytes / 512, .blocks = 1}), buffer, io), MediaIoStart::unsupported);
  EXPECT_EQ(io.calls, 0);
}

// Two writes to one range never overlap on the media: the second is left to execute(), which
// waits for the range (the lock COMPARE AND WRITE relies on, SBC-4 §5.3); once the first ended
// the range is free again.
TEST_F(StartMediaIo, AWriteWhoseRangeIsHeldIsLeftToExecute) {
  std::vector<std::byte> a(pattern(4096, 1)), b(pattern(4096, 2));
  RecordingIo first, second;
  ASSERT_EQ(start(scsi::write16({.lba = 8, .blocks = 8}), a, first), MediaIoStart::started);
  EXPECT_EQ(start(scsi::write16({.lba = 12, .blocks = 8}), b, second), MediaIoStart::unsupported);
  // A read of the range and a write elsewhere go ahead.
  RecordingIo read, elsewhere;
  std::vector<std::byte> in(4096);
  EXPECT_EQ(start(scsi::read16({.lba = 8, .blocks = 8}), in, read), MediaIoStart::started);
  EXPECT_EQ(start(scsi::write16({.lba = 100, .blocks = 8}), b, elsewhere), MediaIoStart::started);
  wait(first);
  wait(read);
  wait(elsewhere);
  EXPECT_EQ(start(scsi::write16({.lba = 12, .blocks = 8}), b, second), MediaIoStart::started);
  wait(second);
  EXPECT_EQ(second.got.status, Status::good);
}

}  // namespace
}  // namespace iserkit::target
