// The copy manager's in-kernel path (issue 25 item 1): BlockBackend::copy_from() of the io_uring
// backend (splice file → pipe → file: the source through the page cache, or O_DIRECT for
// proceed(), the destination through O_DIRECT; on /var/tmp, ext4 here, and /dev/shm, buffered),
// its refusals (another kind of source, overlapping ranges of one file, proceed() without a
// snapshot), proceed() stopping a copy before the part it checked is written, the coherence of
// the copied data with the backend's O_DIRECT and buffered reads; the chunk mover's choice of path
// (chunk_path()), its fallback to the user-space buffer when the destination refuses (probed once
// per move), the per-LU counters copy_bytes_in_kernel / copy_bytes_user_space, and EXTENDED COPY
// between file LUNs (also overlapping ranges of one LU, copied like memmove) through the dispatcher.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/extended_copy.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::Status;

constexpr std::uint32_t bs = 512;
constexpr std::uint64_t file_bytes = 16u << 20;

/// A temporary LUN file of `bytes` in `dir` (removed at the end).
struct TempLun : test::TempLun {
  TempLun(const char* dir, std::uint64_t bytes) : test::TempLun(dir, bytes, "kcopy") {}
};

std::string skip_reason(const char* dir) { return test::uring_file_skip_reason(dir); }

/// `n` bytes whose every 512-byte block differs (seeded).
std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte((i / bs * 31 + seed * 7 + i) & 0xff);
  return v;
}

/// A buffer aligned for O_DIRECT (so the backend's read takes its direct fd) or deliberately not.
struct Buffer {
  explicit Buffer(std::size_t n, bool aligned) : storage(n + 4096 + 1) {
    auto p = reinterpret_cast<std::uintptr_t>(storage.data());
    p = (p + 4095) / 4096 * 4096 + (aligned ? 0 : 1);
    span = ByteSpan(reinterpret_cast<std::byte*>(p), n);
  }
  std::vector<std::byte> storage;
  ByteSpan span;
  [[nodiscard]] std::vector<std::byte> bytes() const { return {span.begin(), span.end()}; }
};

KernelCopy kernel_copy(std::uint64_t from, std::uint64_t to, std::uint64_t n) {
  KernelCopy c;
  c.source_offset_bytes = from;
  c.offset_bytes = to;
  c.length_bytes = n;
  return c;
}

class UringKernelCopy : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (auto why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(a_.path.empty());
    ASSERT_FALSE(b_.path.empty());
    auto a = open_uring_backend({.path = a_.path});
    auto b = open_uring_backend({.path = b_.path});
    ASSERT_TRUE(a && b);
    source = *a;
    destination = *b;
    ASSERT_TRUE(destination->capabilities().can_copy_in_kernel);
  }
  Result<void> write(BlockBackend& to, std::uint64_t offset, const std::vector<std::byte>& data) {
    Buffer buf(data.size(), true);
    std::copy(data.begin(), data.end(), buf.span.begin());
    return test::run(ctx, to.write(offset, buf.span, Fua::no));
  }
  std::vector<std::byte> read(BlockBackend& from, std::uint64_t offset, std::size_t n, bool aligned) {
    Buffer buf(n, aligned);
    EXPECT_TRUE(test::run(ctx, from.read(offset, buf.span)));
    return buf.bytes();
  }
  Result<void> copy(BlockBackend& to, BlockBackend& from, KernelCopy& c) { return test::run(ctx, to.copy_from(from, c)); }

  asio::io_context ctx;
  TempLun a_{GetParam(), file_bytes};
  TempLun b_{GetParam(), file_bytes};
  std::shared_ptr<BlockBackend> source, destination;
};

// Aligned and 512-byte offsets alike, over a destination range whose page cache a buffered read
// filled before; read back through the backend's direct path (an aligned buffer: O_DIRECT on
// /var/tmp) and its buffered path (a misaligned one): the page cache the splice wrote and the
// direct I/O agree after the copy. The 512-byte offset also makes the splices short (1 MiB from
// offset 512 spans 257 pages, the pipe holds 256), so the drain of a cancelled link is exercised.
TEST_P(UringKernelCopy, CopiesFileToFileAndReadsBackCoherently) {
  for (const auto& [from, to, n] : {std::tuple<std::uint64_t, std::uint64_t, std::size_t>{0, 4u << 20, 3u << 20},
                                   std::tuple<std::uint64_t, std::uint64_t, std::size_t>{512, (9u << 20) + 1536, (2u << 20) + 3584}}) {
    const auto data = pattern(n, static_cast<unsigned>(from + 1));
    ASSERT_TRUE(write(*source, from, data));
    // Stale page cache of the destination range first (a buffered read), which the copy must not leave behind.
    (void)read(*destination, to, n, false);
    KernelCopy c = kernel_copy(from, to, n);
    auto r = copy(*destination, *source, c);
    // A file system whose O_DIRECT wants 4096-byte offsets refuses the 512-byte one (the caller
    // then copies through its buffer); ext4 on a 512-byte-sector disk takes it.
    if (!r && r.error() == std::errc::operation_not_supported && to % 4096 != 0) continue;
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(read(*destination, to, n, true), data) << "direct read at " << to;
    EXPECT_EQ(read(*destination, to, n, false), data) << "buffered read at " << to;
    EXPECT_EQ(read(*destination, to - 512, 512, true), std::vector<std::byte>(512)) << "the block before was written";
    EXPECT_EQ(read(*destination, to + n, 512, true), std::vector<std::byte>(512)) << "the block after was written";
  }
}

TEST_P(UringKernelCopy, OneFileNonOverlappingCopiesOverlappingIsRefused) {
  const auto data = pattern(1u << 20, 9);
  ASSERT_TRUE(write(*source, 0, data));
  KernelCopy apart = kernel_copy(0, 2u << 20, 1u << 20);
  ASSERT_TRUE(copy(*source, *source, apart));
  EXPECT_EQ(read(*source, 2u << 20, 1u << 20, true), data);
  KernelCopy overlapping = kernel_copy(0, 4096, 1u << 20);
  auto r = copy(*source, *source, overlapping);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_not_supported);
  EXPECT_EQ(read(*source, 0, 1u << 20, true), data) << "nothing written";
}

TEST_P(UringKernelCopy, AnotherKindOfSourceIsRefused) {
  auto memory = make_memory_backend({.size_bytes = file_bytes, .block_size_bytes = bs});
  KernelCopy c = kernel_copy(0, 0, 4096);
  auto r = copy(*destination, *memory, c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_not_supported);
  // And the memory backend does not copy in the kernel at all.
  EXPECT_FALSE(memory->capabilities().can_copy_in_kernel);
}

// proceed() (WRITE USING TOKEN's token check) runs after each part was read and before it is
// written: false ends the copy with ECANCELED and that part unwritten. It needs a snapshot of the
// source (O_DIRECT reads into fresh pages): without O_DIRECT (tmpfs) the copy is refused.
TEST_P(UringKernelCopy, ProceedChecksEachPartBeforeItIsWritten) {
  constexpr std::size_t n = 3u << 20;
  const auto data = pattern(n, 4);
  ASSERT_TRUE(write(*source, 0, data));
  int calls = 0;
  KernelCopy c = kernel_copy(0, 0, n);
  c.proceed = [&] { return ++calls < 2; };
  auto r = copy(*destination, *source, c);
  ASSERT_FALSE(r);
  if (std::string(GetParam()) == "/dev/shm") {
    EXPECT_EQ(r.error(), std::errc::operation_not_supported);
    EXPECT_EQ(calls, 0);
    return;
  }
  EXPECT_EQ(r.error(), std::errc::operation_canceled);
  EXPECT_EQ(calls, 2);
  // The first part (the pipe's capacity) was written; the second, refused, was not.
  const auto got = read(*destination, 0, n, true);
  std::size_t written = 0;
  while (written < n && got[written] == data[written]) ++written;
  EXPECT_GT(written, 0u);
  EXPECT_EQ(written % 4096, 0u);
  EXPECT_LT(written, n);
  EXPECT_EQ(std::vector<std::byte>(got.begin() + static_cast<std::ptrdiff_t>(written), got.end()),
            std::vector<std::byte>(n - written));
  // Allowed to go on: the whole range.
  c.proceed = [] { return true; };
  ASSERT_TRUE(copy(*destination, *source, c));
  EXPECT_EQ(read(*destination, 0, n, true), data);
}

INSTANTIATE_TEST_SUITE_P(Dirs, UringKernelCopy, ::testing::Values("/var/tmp", "/dev/shm"));

// ---------------------------------------------------------------------------------------------
// The chunk mover's choice of path
// ---------------------------------------------------------------------------------------------

/// A memory backend that claims in-kernel copies and fakes them (counting the calls), or refuses
/// them with `refuse_with`.
class FakeKernelBackend final : public BlockBackend {
 public:
  FakeKernelBackend() : inner_(make_memory_backend({.size_bytes = file_bytes, .block_size_bytes = bs})) {
    caps_ = inner_->capabilities();
    caps_.can_copy_in_kernel = true;
  }
  const BackendCapabilities& capabilities() const noexcept override { return caps_; }
  Awaitable<Result<void>> read(std::uint64_t o, ByteSpan b) override {
    ++reads;
    co_return co_await inner_->read(o, b);
  }
  Awaitable<Result<void>> write(std::uint64_t o, ConstByteSpan b, Fua f) override {
    ++writes;
    co_return co_await inner_->write(o, b, f);
  }
  Awaitable<Result<void>> flush() override { co_return co_await inner_->flush(); }
  Awaitable<Result<void>> discard(std::uint64_t o, std::uint64_t n) override { co_return co_await inner_->discard(o, n); }
  Awaitable<Result<void>> write_zeroes(std::uint64_t o, std::uint64_t n, Fua f) override {
    co_return co_await inner_->write_zeroes(o, n, f);
  }
  Awaitable<Result<void>> copy_from(BlockBackend& source, KernelCopy& c) override {
    ++copies;
    if (refuse_with != 0) co_return fail(std::error_code(refuse_with, std::generic_category()));
    auto* from = dynamic_cast<FakeKernelBackend*>(&source);
    if (from == nullptr) co_return fail(std::make_error_code(std::errc::operation_not_supported));
    std::vector<std::byte> part(c.length_bytes);
    if (auto r = co_await from->inner_->read(c.source_offset_bytes, part); !r) co_return r;
    if (c.proceed && !c.proceed()) co_return fail(std::make_error_code(std::errc::operation_canceled));
    co_return co_await inner_->write(c.offset_bytes, part, Fua::no);
  }
  int reads = 0, writes = 0, copies = 0;
  int refuse_with = 0;  ///< an errno copy_from() answers with

 private:
  std::shared_ptr<BlockBackend> inner_;
  BackendCapabilities caps_;
};

TEST(ChunkPath, InKernelOnlyWithASourceADestinationThatCanAndNoRefusal) {
  auto memory = make_memory_backend({.size_bytes = file_bytes, .block_size_bytes = bs});
  FakeKernelBackend fake;
  detail::BlockMove m;
  m.source = memory.get();
  m.destination = &fake;
  m.source_lba = 0;
  m.destination_lba = 100;
  m.blocks = 300;
  m.block_size_bytes = bs;
  using detail::chunk_path;
  using detail::ChunkPath;
  EXPECT_EQ(chunk_path(m, 0, 300, false), ChunkPath::in_kernel);
  EXPECT_EQ(chunk_path(m, 0, 300, true), ChunkPath::user_space);  // refused before in this move
  m.source = nullptr;  // zeroes
  EXPECT_EQ(chunk_path(m, 0, 300, false), ChunkPath::user_space);
  m.source = &fake;
  m.destination = memory.get();  // a memory LU never copies in the kernel
  EXPECT_EQ(chunk_path(m, 0, 300, false), ChunkPath::user_space);
  // One backend: a chunk whose source and destination blocks overlap goes through the buffer
  // (read whole before it is written, as memmove needs); a chunk clear of its source need not.
  m.destination = &fake;
  EXPECT_EQ(chunk_path(m, 0, 300, false), ChunkPath::user_space);   // 0..299 → 100..399
  EXPECT_EQ(chunk_path(m, 0, 100, false), ChunkPath::in_kernel);    // 0..99 → 100..199
  EXPECT_EQ(chunk_path(m, 200, 100, false), ChunkPath::in_kernel);  // 200..299 → 300..399
  EXPECT_EQ(chunk_path(m, 100, 101, false), ChunkPath::user_space); // 100..200 → 200..300
}

/// Two LUs over `a` and `b` in one device server, one nexus.
struct TwoUnits {
  TwoUnits(std::shared_ptr<BlockBackend> a, std::shared_ptr<BlockBackend> b) {
    std::shared_ptr<BlockBackend> backends[2] = {std::move(a), std::move(b)};
    for (int i = 0; i < 2; ++i) {
      LogicalUnitOptions o;
      o.identity.serial = "KCOPY-" + std::to_string(i);
      units[i] = std::make_shared<LogicalUnit>(backends[i], std::move(o));
      EXPECT_TRUE(dispatcher.add_logical_unit(static_cast<std::uint16_t>(i), units[i]));
    }
    nexus = dispatcher.open_nexus("iqn.test:a,i,0x1", {}, "192.0.2.1");
    for (int i = 0; i < 2; ++i) (void)command(raw({0x00}), {}, i);  // clear POWER ON, RESET
  }
  static scsi::Cdb raw(std::initializer_list<unsigned> bytes) { return test::raw(bytes); }
  static scsi::Cdb rw16(unsigned opcode, std::uint64_t lba, std::uint32_t blocks) { return test::lba16(opcode, lba, blocks); }
  test::CommandRun command(const scsi::Cdb& cdb, const std::vector<std::byte>& data = {}, int lun = 0) {
    return test::run_command(ctx, dispatcher, nexus, Lun::from_index(static_cast<std::uint16_t>(lun)), cdb, data);
  }
  void write(int lun, std::uint64_t lba, const std::vector<std::byte>& data) {
    ASSERT_EQ(command(rw16(0x8a, lba, static_cast<std::uint32_t>(data.size() / bs)), data, lun).outcome.status, Status::good);
  }
  std::vector<std::byte> read(int lun, std::uint64_t lba, std::uint32_t blocks) {
    auto r = command(rw16(0x88, lba, blocks), {}, lun);
    EXPECT_EQ(r.outcome.status, Status::good);
    return r.data_in;
  }
  /// EXTENDED COPY (LID1) of one segment: `blocks` from (`from_lun`, `from`) to (`to_lun`, `to`).
  ScsiOutcome xcopy(int from_lun, std::uint64_t from, int to_lun, std::uint64_t to, std::uint16_t blocks) {
    std::vector<std::byte> p(16);
    p[1] = std::byte(0x3 << 3);  // LIST ID USAGE 11b
    for (int lun : {from_lun, to_lun}) {
      std::vector<std::byte> d(32);
      d[0] = std::byte(0xe4);
      d[4] = std::byte(0x01);
      d[5] = std::byte(0x03);
      const auto naa = units[lun]->naa();
      d[7] = std::byte(naa.size());
      std::copy(naa.begin(), naa.end(), reinterpret_cast<std::uint8_t*>(d.data() + 8));
      store_be24(d.data() + 29, bs);
      p.insert(p.end(), d.begin(), d.end());
    }
    std::vector<std::byte> s(28);
    s[0] = std::byte(0x02);
    store_be16(s.data() + 2, 0x18);
    store_be16(s.data() + 4, 0);
    store_be16(s.data() + 6, 1);
    store_be16(s.data() + 10, blocks);
    store_be64(s.data() + 12, from);
    store_be64(s.data() + 20, to);
    p.insert(p.end(), s.begin(), s.end());
    store_be16(p.data() + 2, 64);
    store_be32(p.data() + 8, 28);
    scsi::Cdb c = raw({0x83, 0});
    store_be32(c.bytes.data() + 10, static_cast<std::uint32_t>(p.size()));
    return command(c, p).outcome;
  }
  std::uint64_t in_kernel(int lun) const { return units[lun]->stats().copy_bytes_in_kernel.load(); }
  std::uint64_t user_space(int lun) const { return units[lun]->stats().copy_bytes_user_space.load(); }

  asio::io_context ctx;
  ScsiDispatcher dispatcher;
  std::shared_ptr<LogicalUnit> units[2];
  NexusId nexus;
};

TEST(KernelCopyMover, ExtendedCopyGoesInTheKernelWhereTheDestinationCan) {
  auto a = std::make_shared<FakeKernelBackend>();
  auto b = std::make_shared<FakeKernelBackend>();
  TwoUnits t(a, b);
  const auto data = pattern(5000 * bs, 1);  // three chunks
  t.write(0, 10, data);
  const int reads = a->reads;
  ASSERT_EQ(t.xcopy(0, 10, 1, 2000, 5000).status, Status::good);
  EXPECT_EQ(t.read(1, 2000, 5000), data);
  EXPECT_EQ(b->copies, 3);
  EXPECT_EQ(a->reads, reads) << "no read through the user-space buffer";
  EXPECT_EQ(t.in_kernel(1), 5000u * bs);
  EXPECT_EQ(t.user_space(1), 0u);
  EXPECT_EQ(t.in_kernel(0) + t.user_space(0), 0u);  // counted at the destination only
}

// A refusal (EINVAL, EOPNOTSUPP, EXDEV) sends that chunk and the rest of the move through the
// buffer: the destination is asked once per move, and the data is right.
TEST(KernelCopyMover, ARefusalFallsBackToTheBufferOncePerMove) {
  for (int refusal : {EINVAL, EOPNOTSUPP, EXDEV}) {
    auto a = std::make_shared<FakeKernelBackend>();
    auto b = std::make_shared<FakeKernelBackend>();
    b->refuse_with = refusal;
    TwoUnits t(a, b);
    const auto data = pattern(5000 * bs, 2);
    t.write(0, 0, data);
    ASSERT_EQ(t.xcopy(0, 0, 1, 100, 5000).status, Status::good) << refusal;
    EXPECT_EQ(t.read(1, 100, 5000), data) << refusal;
    EXPECT_EQ(b->copies, 1) << refusal;
    EXPECT_EQ(t.in_kernel(1), 0u);
    EXPECT_EQ(t.user_space(1), 5000u * bs);
  }
}

// Any other error of the in-kernel copy is the command's (a backend error's sense), no fallback.
TEST(KernelCopyMover, AnotherErrorEndsTheCopyWithItsSense) {
  auto a = std::make_shared<FakeKernelBackend>();
  auto b = std::make_shared<FakeKernelBackend>();
  b->refuse_with = EIO;
  TwoUnits t(a, b);
  const auto outcome = t.xcopy(0, 0, 1, 0, 8);
  ASSERT_EQ(outcome.status, Status::check_condition);
  ASSERT_TRUE(outcome.sense);
  EXPECT_EQ(outcome.sense->key, scsi::SenseKey::copy_aborted);
  EXPECT_NE(outcome.sense->asc, 0);
  EXPECT_EQ(b->writes, 0);
}

// Mixed kinds: a memory source, a destination that copies in the kernel only from its own kind.
TEST(KernelCopyMover, MixedKindsGoThroughTheBuffer) {
  auto a = make_memory_backend({.size_bytes = file_bytes, .block_size_bytes = bs});
  auto b = std::make_shared<FakeKernelBackend>();
  TwoUnits t(a, b);
  const auto data = pattern(3000 * bs, 3);
  t.write(0, 0, data);
  ASSERT_EQ(t.xcopy(0, 0, 1, 0, 3000).status, Status::good);
  EXPECT_EQ(t.read(1, 0, 3000), data);
  EXPECT_EQ(b->copies, 1);
  EXPECT_EQ(t.user_space(1), 3000u * bs);
  EXPECT_EQ(t.in_kernel(1), 0u);
}

// Real file LUNs (io_uring backend) through the dispatcher: between two LUs in the kernel; on one
// LU with overlapping ranges, copied like memmove (chunks whose ranges overlap go through the
// buffer, the others in the kernel), both directions.
class FileLunKernelCopy : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (auto why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
    auto a = open_uring_backend({.path = a_.path});
    auto b = open_uring_backend({.path = b_.path});
    ASSERT_TRUE(a && b);
    t = std::make_unique<TwoUnits>(*a, *b);
  }
  TempLun a_{GetParam(), file_bytes};
  TempLun b_{GetParam(), file_bytes};
  std::unique_ptr<TwoUnits> t;
};

TEST_P(FileLunKernelCopy, BetweenTwoLusInTheKernel) {
  const auto data = pattern(20000 * bs, 5);
  t->write(0, 8, data);
  ASSERT_EQ(t->xcopy(0, 8, 1, 4001, 20000).status, Status::good);
  EXPECT_EQ(t->read(1, 4001, 20000), data);
  EXPECT_EQ(t->in_kernel(1), 20000u * bs);
  EXPECT_EQ(t->user_space(1), 0u);
}

TEST_P(FileLunKernelCopy, OverlappingRangesOfOneLuLikeMemmove) {
  constexpr std::uint16_t blocks = 8192;  // 4 MiB: four chunks of 2048 blocks
  // 1000 blocks up: every chunk overlaps its own source, so each goes through the buffer (from
  // the last chunk to the first).
  const auto up = pattern(std::size_t{blocks} * bs, 6);
  t->write(0, 0, up);
  ASSERT_EQ(t->xcopy(0, 0, 0, 1000, blocks).status, Status::good);
  EXPECT_EQ(t->read(0, 1000, blocks), up);
  EXPECT_EQ(t->user_space(0), std::uint64_t{blocks} * bs);
  EXPECT_EQ(t->in_kernel(0), 0u);
  // 3000 blocks up and 3000 down: the ranges overlap but no chunk overlaps its own source, so
  // every chunk goes in the kernel, in memmove's order.
  const auto up3000 = pattern(std::size_t{blocks} * bs, 7);
  t->write(0, 10000, up3000);
  ASSERT_EQ(t->xcopy(0, 10000, 0, 13000, blocks).status, Status::good);
  EXPECT_EQ(t->read(0, 13000, blocks), up3000);
  const auto down = pattern(std::size_t{blocks} * bs, 8);
  t->write(0, 23000, down);
  ASSERT_EQ(t->xcopy(0, 23000, 0, 20000, blocks).status, Status::good);
  EXPECT_EQ(t->read(0, 20000, blocks), down);
  EXPECT_EQ(t->in_kernel(0), 2u * blocks * bs);
  EXPECT_EQ(t->user_space(0), std::uint64_t{blocks} * bs);
}

INSTANTIATE_TEST_SUITE_P(Dirs, FileLunKernelCopy, ::testing::Values("/var/tmp", "/dev/shm"));

}  // namespace
}  // namespace iserkit::target
