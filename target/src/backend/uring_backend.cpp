// UringBackend: the io_uring block backend (layer 5) over a regular file or block device, and
// open_uring_backend(), which opens one and learns its size (fstat / BLKGETSIZE64). Reads and
// writes use an O_DIRECT fd when buffer, offset and length meet the file's direct I/O alignment
// (statx STATX_DIOALIGN; 512 on a disk with 512-byte logical blocks; 4096 when unknown) and a
// buffered fd otherwise; FUA is RWF_DSYNC (SBC-4 §4.15); flush is IORING_OP_FSYNC with IORING_FSYNC_DATASYNC;
// discard is IORING_OP_FALLOCATE(PUNCH_HOLE|KEEP_SIZE); write_zeroes is FALLOC_FL_ZERO_RANGE. Short
// completions are continued until the full length is done (the backend contract).
//
// A file on a RAM file system (tmpfs, ramfs) is read and written inline, with preadv2/pwritev2 on
// the loop's thread: its pages are memory, so the call is a memory copy that cannot wait on a disk.
// Through io_uring every such request would go to a kernel worker thread (io-wq) instead: tmpfs
// refuses non-blocking reads and writes (RWF_NOWAIT answers EOPNOTSUPP, buffered or O_DIRECT, on
// Linux 6.1 and 6.18 alike), so io_uring cannot issue them inline, and the hop costs two context
// switches plus the eventfd round trip per request. The one case
// where the inline call can block is a tmpfs page swapped out (then the loop waits for swap-in).
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <new>

#include "backend/uring_ring.hpp"
#include "iserkit/target/backends.hpp"

namespace iserkit::target {
namespace {

using detail::uring_run;
using detail::UringOp;
using detail::UringService;

constexpr std::size_t direct_alignment = 4096;  // the fallback when the kernel does not say
constexpr std::size_t max_op_bytes = 1u << 30;  // keep each SQE's length well inside 32 bits

std::error_code errno_code(int e) { return {e, std::generic_category()}; }

/// What O_DIRECT requires of a request: offset and length multiples of `offset_align`, the buffer
/// address a multiple of `memory_align` (bytes; powers of two).
struct DirectAlignment {
  std::uint32_t offset_align = direct_alignment;
  std::uint32_t memory_align = direct_alignment;
};

/// statx(2) STATX_DIOALIGN (Linux 6.1) for files and block devices; a block device on an older
/// kernel uses its logical block size (BLKSSZGET) for both; otherwise 4096, which every device takes.
/// With 512-byte logical blocks this lets 512-aligned SCSI requests bypass the page cache too.
DirectAlignment direct_alignment_of(int fd, bool block_device) noexcept {
  DirectAlignment a;
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) != 0 &&
      stx.stx_dio_offset_align != 0 && stx.stx_dio_mem_align != 0) {
    a.offset_align = std::max<std::uint32_t>(stx.stx_dio_offset_align, 512);
    a.memory_align = std::max<std::uint32_t>(stx.stx_dio_mem_align, 512);
    return a;
  }
  int logical = 0;
  if (block_device && ::ioctl(fd, BLKSSZGET, &logical) == 0 && logical >= 512) {
    a.offset_align = a.memory_align = static_cast<std::uint32_t>(logical);
  }
  return a;
}

const std::byte* zero_block() noexcept {
  alignas(direct_alignment) static const std::array<std::byte, 1u << 20> zeroes{};
  return zeroes.data();
}

/// True when `fd` lives on a RAM file system (tmpfs, ramfs): its reads and writes are memory copies.
bool on_memory_file_system(int fd) noexcept {
  struct statfs sfs {};
  if (::fstatfs(fd, &sfs) != 0) return false;
  return sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
}

class UringBackend final : public BlockBackend {
 public:
  UringBackend(int buffered_fd, int direct_fd, DirectAlignment alignment, BackendCapabilities caps, bool inline_io)
      : buffered_fd_(buffered_fd), direct_fd_(direct_fd), alignment_(alignment), caps_(caps), inline_io_(inline_io) {}
  ~UringBackend() override {
    ::close(buffered_fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }
  UringBackend(const UringBackend&) = delete;
  UringBackend& operator=(const UringBackend&) = delete;

  const BackendCapabilities& capabilities() const noexcept override { return caps_; }

  Awaitable<Result<void>> read(std::uint64_t offset, ByteSpan out) override {
    check_range(offset, out.size());
    co_return co_await transfer(false, offset, out.data(), out.size(), 0);
  }

  Awaitable<Result<void>> write(std::uint64_t offset, ConstByteSpan data, Fua fua) override {
    check_range(offset, data.size());
    if (caps_.read_only) co_return fail(errno_code(EROFS));
    // SBC-4 §4.15: FUA → the data is on stable media before completion: RWF_DSYNC per write.
    co_return co_await transfer(true, offset, const_cast<std::byte*>(data.data()), data.size(),
                                fua == Fua::yes ? RWF_DSYNC : 0);
  }

  // The fast path (block_backend.hpp): the same transfer as read()/write(), driven by reap()'s
  // callbacks instead of a coroutine; its state lives in the caller's BackendTransfer.
  TransferStart start_transfer(BackendTransfer& t) override {
    check_range(t.offset_bytes, t.length_bytes);
    if (t.writing && caps_.read_only) {
      t.result = fail(errno_code(EROFS));
      return TransferStart::done;
    }
    const int rw_flags = t.writing && t.fua == Fua::yes ? RWF_DSYNC : 0;
    if (inline_io_) {
      t.result = transfer_inline(t.writing, t.offset_bytes, t.data, t.length_bytes, rw_flags);
      return TransferStart::done;
    }
    auto service = UringService::of(t.executor);
    if (!service) {
      t.result = fail(service.error());
      return TransferStart::done;
    }
    auto* op = new (t.backend_state.data()) TransferOp{};
    op->on_complete = &TransferOp::completed;
    op->transfer = &t;
    op->service = *service;
    op->backend = this;
    op->p = t.data;
    op->offset = t.offset_bytes;
    op->left = t.length_bytes;
    op->rw_flags = rw_flags;
    if (!op->submit()) {
      op->~TransferOp();
      t.result = fail(errno_code(EBUSY));
      return TransferStart::done;
    }
    return TransferStart::started;
  }

  Awaitable<Result<void>> flush() override {
    if (caps_.read_only) co_return Result<void>{};
    const int fd = buffered_fd_;
    const int res = co_await uring_run([fd](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC); });
    if (res < 0) co_return fail(errno_code(-res));
    co_return Result<void>{};
  }

  Awaitable<Result<void>> discard(std::uint64_t offset, std::uint64_t length) override {
    check_range(offset, length);
    if (caps_.read_only) co_return fail(errno_code(EROFS));
    const int res = co_await fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
    if (res == 0) co_return Result<void>{};
    if (res != -EOPNOTSUPP && res != -EINVAL) co_return fail(errno_code(-res));
    // No hole punching here: discarded blocks must still read as zeroes (discard_zeroes).
    co_return co_await write_zeroes(offset, length, Fua::no);
  }

  Awaitable<Result<void>> write_zeroes(std::uint64_t offset, std::uint64_t length, Fua fua) override {
    check_range(offset, length);
    if (caps_.read_only) co_return fail(errno_code(EROFS));
    int res = co_await fallocate(FALLOC_FL_ZERO_RANGE, offset, length);
    if (res == -EOPNOTSUPP || res == -EINVAL) {
      res = co_await fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
    }
    if (res == -EOPNOTSUPP || res == -EINVAL) {
      // Last resort: write zeroes from a static zero buffer, 1 MiB at a time.
      std::uint64_t done = 0;
      while (done < length) {
        const std::uint64_t n = std::min<std::uint64_t>(length - done, 1u << 20);
        auto r = co_await transfer(true, offset + done, const_cast<std::byte*>(zero_block()), n, 0);
        if (!r) co_return r;
        done += n;
      }
      res = 0;
    }
    if (res < 0) co_return fail(errno_code(-res));
    if (fua == Fua::yes) co_return co_await flush();
    co_return Result<void>{};
  }

  // Holes of a sparse file (SEEK_DATA/SEEK_HOLE, lseek(2)): cheap metadata queries, done inline.
  // A file system without hole support reports everything as data. Block devices: all allocated.
  Awaitable<Result<AllocationExtent>> allocation(std::uint64_t offset, std::uint64_t max_length) override {
    const auto o = static_cast<off_t>(offset);
    const off_t data = ::lseek(buffered_fd_, o, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) co_return AllocationExtent{.allocated = false, .length_bytes = max_length};  // hole to EOF
      co_return AllocationExtent{.allocated = true, .length_bytes = max_length};  // no SEEK_DATA: treat as data
    }
    if (data > o) {
      co_return AllocationExtent{.allocated = false,
                                 .length_bytes = std::min<std::uint64_t>(static_cast<std::uint64_t>(data) - offset, max_length)};
    }
    const off_t hole = ::lseek(buffered_fd_, o, SEEK_HOLE);
    if (hole <= o) co_return AllocationExtent{.allocated = true, .length_bytes = max_length};
    co_return AllocationExtent{.allocated = true,
                               .length_bytes = std::min<std::uint64_t>(static_cast<std::uint64_t>(hole) - offset, max_length)};
  }

 private:
  void check_range(std::uint64_t offset, std::uint64_t length) const noexcept {
    // The SCSI layer checked the range (block_backend.hpp preconditions).
    assert(offset <= caps_.size_bytes && length <= caps_.size_bytes - offset);
    (void)offset;
    (void)length;
  }

  Awaitable<int> fallocate(int mode, std::uint64_t offset, std::uint64_t length) {
    const int fd = buffered_fd_;
    co_return co_await uring_run([=](io_uring_sqe* sqe) {
      io_uring_prep_fallocate(sqe, fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length));
    });
  }

  // Reads or writes all `length` bytes, continuing after short completions.
  Awaitable<Result<void>> transfer(bool writing, std::uint64_t offset, std::byte* p, std::size_t length, int rw_flags) {
    if (inline_io_) co_return transfer_inline(writing, offset, p, length, rw_flags);
    while (length > 0) {
      const std::size_t n = std::min(length, max_op_bytes);
      const bool direct = direct_fd_ >= 0 && offset % alignment_.offset_align == 0 &&
                          n % alignment_.offset_align == 0 &&
                          reinterpret_cast<std::uintptr_t>(p) % alignment_.memory_align == 0;
      const int fd = direct ? direct_fd_ : buffered_fd_;
      const int res = co_await uring_run([=](io_uring_sqe* sqe) {
        if (writing) {
          io_uring_prep_write(sqe, fd, p, static_cast<unsigned>(n), offset);
        } else {
          io_uring_prep_read(sqe, fd, p, static_cast<unsigned>(n), offset);
        }
        sqe->rw_flags = rw_flags;
      });
      if (res == -EINTR || res == -EAGAIN) continue;
      if (res < 0) co_return fail(errno_code(-res));
      if (res == 0) co_return fail(errno_code(EIO));  // end of file inside the LUN: treat as I/O error
      p += res;
      offset += static_cast<std::uint64_t>(res);
      length -= static_cast<std::size_t>(res);
    }
    co_return Result<void>{};
  }

  // One start_transfer() in flight: submits a piece (up to max_op_bytes), continues after short
  // completions, and ends with BackendTransfer::transferred().
  struct TransferOp : UringOp {
    BackendTransfer* transfer = nullptr;
    UringService* service = nullptr;
    const UringBackend* backend = nullptr;
    std::byte* p = nullptr;
    std::uint64_t offset = 0;
    std::size_t left = 0;
    int rw_flags = 0;

    /// Queues the next piece; false when the ring takes no SQE.
    bool submit() noexcept {
      const std::size_t n = std::min(left, max_op_bytes);
      const auto& a = backend->alignment_;
      const bool direct = backend->direct_fd_ >= 0 && offset % a.offset_align == 0 && n % a.offset_align == 0 &&
                          reinterpret_cast<std::uintptr_t>(p) % a.memory_align == 0;
      const int fd = direct ? backend->direct_fd_ : backend->buffered_fd_;
      io_uring_sqe* sqe = service->get_sqe();
      if (sqe == nullptr) return false;
      if (transfer->writing) {
        io_uring_prep_write(sqe, fd, p, static_cast<unsigned>(n), offset);
      } else {
        io_uring_prep_read(sqe, fd, p, static_cast<unsigned>(n), offset);
      }
      sqe->rw_flags = rw_flags;
      service->queued(*this, sqe);
      return true;
    }
    void finish(Result<void> result) noexcept {
      BackendTransfer* t = transfer;
      this->~TransferOp();  // the caller may reuse its BackendTransfer from transferred() on
      t->transferred(std::move(result));
    }
    static void completed(UringOp& base) noexcept {
      auto& op = static_cast<TransferOp&>(base);
      const int res = op.res;
      if (res == -EINTR || res == -EAGAIN) {
        if (!op.submit()) op.finish(fail(errno_code(EBUSY)));
        return;
      }
      if (res < 0) return op.finish(fail(errno_code(-res)));
      if (res == 0) return op.finish(fail(errno_code(EIO)));  // end of file inside the LUN
      op.p += res;
      op.offset += static_cast<std::uint64_t>(res);
      op.left -= static_cast<std::size_t>(res);
      if (op.left == 0) return op.finish(Result<void>{});
      if (!op.submit()) op.finish(fail(errno_code(EBUSY)));
    }
  };
  static_assert(sizeof(TransferOp) <= sizeof(BackendTransfer::backend_state));
  static_assert(alignof(TransferOp) <= alignof(std::max_align_t));

  // transfer() for a RAM file system (see the top of this file): synchronous, on this thread.
  Result<void> transfer_inline(bool writing, std::uint64_t offset, std::byte* p, std::size_t length,
                               int rw_flags) const {
    while (length > 0) {
      iovec iov{.iov_base = p, .iov_len = std::min(length, max_op_bytes)};
      const ssize_t res = writing ? ::pwritev2(buffered_fd_, &iov, 1, static_cast<off_t>(offset), rw_flags)
                                  : ::preadv2(buffered_fd_, &iov, 1, static_cast<off_t>(offset), rw_flags);
      if (res < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (res < 0) return fail(errno_code(errno));
      if (res == 0) return fail(errno_code(EIO));  // end of file inside the LUN: treat as I/O error
      p += res;
      offset += static_cast<std::uint64_t>(res);
      length -= static_cast<std::size_t>(res);
    }
    return {};
  }

  int buffered_fd_;
  int direct_fd_;
  DirectAlignment alignment_;
  BackendCapabilities caps_;
  bool inline_io_;  // a RAM file system: transfer_inline()
};

}  // namespace

Result<std::shared_ptr<BlockBackend>> open_uring_backend(const OpenBackendOptions& options) {
  if (options.block_size_bytes != 512 && options.block_size_bytes != 4096) return fail(errno_code(EINVAL));
  const int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  const int fd = ::open(options.path.c_str(), flags);
  if (fd < 0) return fail(errno_code(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return fail(errno_code(e));
  }
  std::uint64_t size = 0;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      const int e = errno;
      ::close(fd);
      return fail(errno_code(e));
    }
  } else {
    ::close(fd);
    return fail(errno_code(EINVAL));
  }
  // A RAM file system is served inline (top of this file). O_DIRECT means nothing there (tmpfs
  // refuses it before Linux 6.6 and copies through its page cache after), so it is not opened.
  const bool inline_io = S_ISREG(st.st_mode) && on_memory_file_system(fd);
  // O_DIRECT may be refused; then every request goes through the page cache.
  const int direct_fd = options.use_direct_io && !inline_io ? ::open(options.path.c_str(), flags | O_DIRECT) : -1;
  const DirectAlignment alignment = direct_fd >= 0 ? direct_alignment_of(direct_fd, S_ISBLK(st.st_mode)) : DirectAlignment{};
  BackendCapabilities caps;
  caps.block_size_bytes = options.block_size_bytes;
  caps.size_bytes = size / options.block_size_bytes * options.block_size_bytes;
  caps.read_only = options.read_only;
  caps.can_discard = !options.read_only;
  caps.discard_zeroes = true;  // hole punch reads back zeroes; the fallback writes zeroes
  caps.can_write_zeroes = true;
  caps.can_start_transfer = true;
  caps.thin = S_ISREG(st.st_mode);
  caps.volatile_cache = true;
  caps.optimal_io_bytes = static_cast<std::uint32_t>(std::max<blksize_t>(st.st_blksize, 4096));
  return std::shared_ptr<BlockBackend>(std::make_shared<UringBackend>(fd, direct_fd, alignment, caps, inline_io));
}

Result<void> probe_io_uring() noexcept {
  io_uring ring;
  if (int rc = io_uring_queue_init(4, &ring, 0); rc < 0) return fail(errno_code(-rc));
  io_uring_queue_exit(&ring);
  return {};
}

}  // namespace iserkit::target
