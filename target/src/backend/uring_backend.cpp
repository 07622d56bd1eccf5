// UringBackend: the io_uring block backend (layer 5) over a regular file or block device, and
// open_uring_backend(), which opens one and learns its size (fstat / BLKGETSIZE64). Reads and
// writes use an O_DIRECT fd when buffer, offset and length meet the file's direct I/O alignment
// (statx STATX_DIOALIGN; 512 on a disk with 512-byte logical blocks; 4096 when unknown) and a
// buffered fd otherwise; FUA is RWF_DSYNC (SBC-4 §4.15); flush is IORING_OP_FSYNC with IORING_FSYNC_DATASYNC;
// discard is IORING_OP_FALLOCATE(PUNCH_HOLE|KEEP_SIZE); write_zeroes is FALLOC_FL_ZERO_RANGE. Short
// completions are continued until the full length is done (the backend contract).
//
// copy_from() (the copy manager's in-kernel copy, EXTENDED COPY and WRITE USING TOKEN between two
// UringBackends) moves data without a user-space buffer: IORING_OP_SPLICE source file → pipe, linked
// (IOSQE_IO_LINK) to IORING_OP_SPLICE pipe → destination file, both run by io_uring's kernel
// workers (io-wq), never on the loop's thread. The pipes come from a small pool per io_context
// (SplicePipes), each sized with F_SETPIPE_SZ to 1 MiB or /proc/sys/fs/pipe-max-size, whichever is
// smaller. The destination is written through its O_DIRECT fd (when it has one, as its own
// writes are: a buffered write's dirty folio could not be invalidated by a concurrent O_DIRECT
// write of a neighbouring block, whose data the folio's stale copy would later overwrite); a range
// O_DIRECT cannot take is refused (the caller's buffer path). The source is read through the page
// cache (a direct write drops the clean pages of its range after it, so no stale data stays),
// except that a copy with KernelCopy::proceed reads it through its O_DIRECT fd: that read lands in
// fresh kernel pages (a snapshot, which WRITE USING TOKEN's per-part check needs), while a buffered
// splice puts references to the page cache's pages in the pipe. A kernel that refuses
// splice on these files (EINVAL, EOPNOTSUPP) is remembered per backend; the caller then copies
// through its own buffer.
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
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <new>
#include <vector>

#include "backend/splice_pipe.hpp"
#include "backend/uring_ring.hpp"
#include "iserkit/target/backends.hpp"

namespace iserkit::target {
namespace {

using detail::uring_run;
using detail::uring_run_linked;
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

/// The largest pipe the in-kernel copy asks for: one chunk of the copy manager (xcopy_chunk_bytes).
constexpr std::size_t splice_pipe_bytes = 1u << 20;

/// The empty pipes of one io_context, reused across copies and chunks (one per copy under way on
/// the loop; a few are kept). Not thread-safe: one thread runs the io_context.
class SplicePipes final : public asio::execution_context::service {
 public:
  using key_type = SplicePipes;
  static inline asio::execution_context::id id;
  explicit SplicePipes(asio::execution_context& context) : asio::execution_context::service(context) {}
  ~SplicePipes() override {
    for (auto& p : free_) p.close();
  }
  void shutdown() override {}

  /// An empty pipe: a kept one, or a new one grown towards splice_pipe_bytes.
  Result<SplicePipe> take() {
    if (!free_.empty()) {
      SplicePipe p = free_.back();
      free_.pop_back();
      return p;
    }
    return open_splice_pipe(splice_pipe_bytes);
  }

  /// Takes back `p`, which must be empty (a pipe with data left in it is closed instead).
  void give_back(SplicePipe p) {
    if (free_.size() < max_kept) {
      free_.push_back(p);
    } else {
      p.close();
    }
  }

 private:
  static constexpr std::size_t max_kept = 4;
  std::vector<SplicePipe> free_;
};

class UringBackend final : public BlockBackend {
 public:
  UringBackend(int buffered_fd, int direct_fd, DirectAlignment alignment, BackendCapabilities caps, bool inline_io,
               std::pair<dev_t, ino_t> file)
      : buffered_fd_(buffered_fd), direct_fd_(direct_fd), alignment_(alignment), caps_(caps), inline_io_(inline_io),
        file_(file) {}
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
    t.spliced = splices_into(t);
    if (inline_io_) {
      if (t.spliced && splice_inline(t)) {
        t.result = Result<void>{};
        return TransferStart::done;
      }
      t.spliced = false;  // the pipe may hold part of it: the caller drops the pipe
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
    op->pipe = t.spliced ? t.splice_pipe : -1;
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

  // The in-kernel copy (top of this file).
  Awaitable<Result<void>> copy_from(BlockBackend& source_backend, KernelCopy& c) override {
    auto* source = dynamic_cast<UringBackend*>(&source_backend);
    if (source == nullptr) co_return fail(errno_code(EOPNOTSUPP));  // another kind of backend
    check_range(c.offset_bytes, c.length_bytes);
    source->check_range(c.source_offset_bytes, c.length_bytes);
    if (caps_.read_only) co_return fail(errno_code(EROFS));
    if (splice_refused_.load(std::memory_order_relaxed) || source->splice_refused_.load(std::memory_order_relaxed))
      co_return fail(errno_code(EOPNOTSUPP));
    // One file, overlapping ranges: the pipe would hold pages the copy is writing.
    if (file_ == source->file_ && c.source_offset_bytes < c.offset_bytes + c.length_bytes &&
        c.offset_bytes < c.source_offset_bytes + c.length_bytes)
      co_return fail(errno_code(EOPNOTSUPP));
    // The destination through its O_DIRECT fd when it has one, as the backend's own writes: a
    // buffered write would leave dirty page cache that the backend's concurrent O_DIRECT writes of
    // neighbouring blocks in the same folio cannot invalidate (the kernel then writes the folio's
    // stale copy of those blocks back later). A range O_DIRECT cannot take goes through the
    // caller's buffer. Without an O_DIRECT fd (tmpfs) every access is buffered: no such mix.
    if (direct_fd_ >= 0 && !direct_aligned(c.offset_bytes, c.length_bytes)) co_return fail(errno_code(EOPNOTSUPP));
    // The source through its O_DIRECT fd only when proceed() needs a snapshot: a direct splice
    // read lands in fresh pages, while a buffered one hands the page cache's pages by reference,
    // which a later write of the source could change before they are written. Otherwise through
    // the page cache: reads cannot leave stale data behind (a direct write drops the clean pages
    // of its range after it), and buffered splice reads were the faster here.
    const bool direct = c.proceed && source->direct_fd_ >= 0 && !source->direct_splice_refused_.load(std::memory_order_relaxed) &&
                        source->direct_aligned(c.source_offset_bytes, c.length_bytes);
    if (c.proceed && !direct) co_return fail(errno_code(EOPNOTSUPP));
    auto& pipes = asio::use_service<SplicePipes>(asio::query(co_await asio::this_coro::executor, asio::execution::context));
    auto pipe = pipes.take();
    if (!pipe) co_return fail(pipe.error());
    std::size_t in_pipe = 0;
    auto r = co_await splice_copy(*source, c, direct, *pipe, in_pipe);
    if (in_pipe == 0) {
      pipes.give_back(*pipe);
    } else {
      pipe->close();  // data left in it (an error or ECANCELED): never reused
    }
    if (!r && (r.error().value() == EINVAL || r.error().value() == EOPNOTSUPP || r.error().value() == ENOSYS)) {
      // Probed once: this kernel refuses splice on these files (through O_DIRECT, or at all).
      if (direct) {
        source->direct_splice_refused_.store(true, std::memory_order_relaxed);
      } else {
        splice_refused_.store(true, std::memory_order_relaxed);
      }
      co_return fail(errno_code(EOPNOTSUPP));
    }
    co_return r;
  }

 private:
  bool direct_aligned(std::uint64_t offset, std::uint64_t length) const noexcept {
    return offset % alignment_.offset_align == 0 && length % alignment_.offset_align == 0;
  }

  // copy_from()'s loop: source → pipe → this backend (its O_DIRECT fd when it has one; `direct`:
  // from the source's O_DIRECT fd), `in_pipe` the bytes read and not yet written.
  Awaitable<Result<void>> splice_copy(const UringBackend& source, KernelCopy& c, bool direct, const SplicePipe& pipe,
                                      std::size_t& in_pipe) {
    const int in_fd = direct ? source.direct_fd_ : source.buffered_fd_;
    const int out_fd = direct_fd_ >= 0 ? direct_fd_ : buffered_fd_;
    const int pipe_in = pipe.read_fd;
    const int pipe_out = pipe.write_fd;
    std::uint64_t source_offset = c.source_offset_bytes;
    std::uint64_t offset = c.offset_bytes;
    std::uint64_t left = c.length_bytes;  // not yet read into the pipe
    const auto retry = [](int res) { return res == -EINTR || res == -EAGAIN; };
    const auto to_pipe = [&](std::size_t n) {
      return [=](io_uring_sqe* sqe) {
        io_uring_prep_splice(sqe, in_fd, static_cast<std::int64_t>(source_offset), pipe_out, -1,
                             static_cast<unsigned>(n), 0);
      };
    };
    const auto from_pipe = [&](std::size_t n) {
      return [=](io_uring_sqe* sqe) {
        io_uring_prep_splice(sqe, pipe_in, -1, out_fd, static_cast<std::int64_t>(offset), static_cast<unsigned>(n), 0);
      };
    };
    const auto read_error = [&c](int res) {
      c.read_failed = true;
      return fail(errno_code(res == 0 ? EIO : -res));  // 0: end of file inside the LUN
    };
    while (left > 0 || in_pipe > 0) {
      // Whatever the pipe holds is written before anything more is read: a read never finds the
      // pipe full, so it never waits for room (buffered splices put partial pages in the pipe, so
      // its capacity in bytes is not a promise of room).
      if (in_pipe > 0) {
        const int res = co_await uring_run(from_pipe(in_pipe));
        if (retry(res)) continue;
        if (res <= 0) co_return fail(errno_code(res == 0 ? EIO : -res));
        in_pipe -= static_cast<std::size_t>(res);
        offset += static_cast<std::uint64_t>(res);
        continue;
      }
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, pipe.capacity));
      if (c.proceed) {
        // A part: what one read put in the pipe, checked before any of it is written (above).
        const int res = co_await uring_run(to_pipe(n));
        if (retry(res)) continue;
        if (res <= 0) co_return read_error(res);
        in_pipe = static_cast<std::size_t>(res);
        source_offset += static_cast<std::uint64_t>(res);
        left -= static_cast<std::uint64_t>(res);
        if (!c.proceed()) co_return fail(errno_code(ECANCELED));
        continue;
      }
      // A linked pair; a short read cancels the write (-ECANCELED) and its bytes wait in the
      // pipe, as do those of a short write.
      const auto [read, written] = co_await uring_run_linked(to_pipe(n), from_pipe(n));
      if (retry(read)) continue;
      if (read <= 0) co_return read_error(read);
      in_pipe += static_cast<std::size_t>(read);
      source_offset += static_cast<std::uint64_t>(read);
      left -= static_cast<std::uint64_t>(read);
      if (written > 0) {
        in_pipe -= static_cast<std::size_t>(written);
        offset += static_cast<std::uint64_t>(written);
      } else if (written < 0 && written != -ECANCELED && !retry(written)) {
        co_return fail(errno_code(-written));
      }
    }
    co_return Result<void>{};
  }

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
    int pipe = -1;  // a read spliced into this pipe (BackendTransfer::splice_pipe), not into p

    /// Queues the next piece; false when the ring takes no SQE.
    bool submit() noexcept {
      const std::size_t n = std::min(left, max_op_bytes);
      if (pipe >= 0) {
        io_uring_sqe* sqe = service->get_sqe();
        if (sqe == nullptr) return false;
        // Through the page cache (the buffered fd): the pipe gets references to its pages.
        io_uring_prep_splice(sqe, backend->buffered_fd_, static_cast<std::int64_t>(offset), pipe, -1,
                             static_cast<unsigned>(n), SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        service->queued(*this, sqe);
        return true;
      }
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
      if (op.pipe >= 0 && res <= 0 && res != -EINTR) {
        // The splice failed (a kernel or file that refuses it, a full pipe, end of file): read
        // the whole range into the buffer instead, as without a pipe; the caller drops the pipe.
        if (res == -EINVAL || res == -EOPNOTSUPP) op.backend->splice_refused_.store(true, std::memory_order_relaxed);
        op.pipe = -1;
        op.transfer->spliced = false;
        op.p = op.transfer->data;
        op.offset = op.transfer->offset_bytes;
        op.left = op.transfer->length_bytes;
        if (!op.submit()) op.finish(fail(errno_code(EBUSY)));
        return;
      }
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

  // Whether read `t` goes into its splice_pipe: only through the page cache, so not when this
  // file is read with O_DIRECT (a pipe's reference to a page would keep a concurrent direct
  // write from invalidating it, leaving stale data in the page cache) unless it is a RAM file
  // system (read inline through the buffered fd, where O_DIRECT changes nothing).
  [[nodiscard]] bool splices_into(const BackendTransfer& t) const noexcept {
    return !t.writing && t.splice_pipe >= 0 && (inline_io_ || direct_fd_ < 0) &&
           !splice_refused_.load(std::memory_order_relaxed);
  }

  // The inline read of a RAM file system into t.splice_pipe (non-blocking: a pipe without room
  // fails rather than waits); false when the pipe does not hold every byte (then the caller reads
  // into the buffer and drops the pipe).
  bool splice_inline(const BackendTransfer& t) const noexcept {
    auto offset = static_cast<loff_t>(t.offset_bytes);
    std::size_t left = t.length_bytes;
    while (left > 0) {
      const ssize_t res = ::splice(buffered_fd_, &offset, t.splice_pipe, nullptr, left, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (res < 0 && errno == EINTR) continue;
      if (res <= 0) {
        if (res < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) splice_refused_.store(true, std::memory_order_relaxed);
        return false;
      }
      left -= static_cast<std::size_t>(res);
    }
    return true;
  }

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
  std::pair<dev_t, ino_t> file_;  // the file (st_dev, st_ino) or block device (0, st_rdev)
  mutable std::atomic<bool> splice_refused_{false};  // splice failed with EINVAL/EOPNOTSUPP here
  std::atomic<bool> direct_splice_refused_{false};  // splice from the O_DIRECT fd failed so
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
  caps.can_copy_in_kernel = true;
  caps.thin = S_ISREG(st.st_mode);
  caps.volatile_cache = true;
  caps.optimal_io_bytes = static_cast<std::uint32_t>(std::max<blksize_t>(st.st_blksize, 4096));
  return std::shared_ptr<BlockBackend>(std::make_shared<UringBackend>(fd, direct_fd, alignment, caps, inline_io,
                                                                             S_ISBLK(st.st_mode) ? std::pair<dev_t, ino_t>{0, static_cast<ino_t>(st.st_rdev)}
                                                                                                 : std::pair<dev_t, ino_t>{st.st_dev, st.st_ino}));
}

Result<void> probe_io_uring() noexcept {
  io_uring ring;
  if (int rc = io_uring_queue_init(4, &ring, 0); rc < 0) return fail(errno_code(-rc));
  io_uring_queue_exit(&ring);
  return {};
}

}  // namespace iserkit::target
