// DataInPipes: the pipes of one connection's zero-copy READ Data-In over TCP (layer 4, the
// target's connection driver).
//
// A large READ from a file the page cache serves (UringBackend on tmpfs, or a buffered file) need
// not pass through user space: the backend splices the range into a pipe (page references,
// BackendTransfer::splice_pipe) and the TCP datamover splices the pipe into the socket behind the
// Data-In header (PduOut::splice_from). The target's two copies of each byte (page cache → task
// buffer → socket buffer) become none; only the receiver's copy out of the socket is left.
//
// The engine is not told: it builds its Data-In PDUs from the task buffer as always (offsets from
// 0, in order), and mark() points those of a spliced task at its pipe, checking that they take the
// bytes in order (a PDU at another offset fails the send rather than sending wrong bytes).
//
// Bounds: at most `max_pipes` pipes per connection (2 file descriptors each), created on first
// use and kept; a READ that finds none free, is smaller than `min_bytes`, or spans more pages
// than a pipe holds takes the buffer path. A pipe comes back when its task ends (end(), at the
// task's ReleaseBudget) and is kept only when empty (a failed, aborted or shortened READ leaves
// bytes in it: it is closed).
//
// Not thread-safe: the connection's io_context thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/splice_pipe.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::target {

class DataInPipes {
 public:
  /// READs smaller than this take the buffer path (a splice costs more system calls than a
  /// small copy).
  static constexpr std::size_t min_bytes = 64 * 1024;
  /// Pipes per connection at most.
  static constexpr std::size_t max_pipes = 16;
  /// The capacity asked for (open_splice_pipe(): at most /proc/sys/fs/pipe-max-size; a smaller
  /// pipe sends larger READs to the buffer path).
  static constexpr std::size_t pipe_bytes = 1u << 20;

  DataInPipes() = default;
  ~DataInPipes();
  DataInPipes(const DataInPipes&) = delete;
  DataInPipes& operator=(const DataInPipes&) = delete;

  /// An empty pipe's write end for a READ of `length_bytes` at byte `offset_bytes` of the
  /// medium, or -1 (too small, too many pages, no pipe free, or pipe creation failed). Every
  /// fd returned must be handed back with started().
  int take(std::uint64_t offset_bytes, std::size_t length_bytes);
  /// The READ that took `write_fd` ended on the backend: when `spliced` (the backend put its
  /// `length_bytes` bytes into the pipe) the pipe now belongs to task `itt` until end(itt);
  /// otherwise it comes back at once. An older pipe of the same ITT (a task that never ended
  /// cleanly) is dropped.
  void started(int write_fd, iscsi::Itt itt, bool spliced, std::size_t length_bytes);
  /// Points every Data-In PDU of `pdus` whose task owns a pipe at that pipe (splice_from).
  /// False when such a PDU does not take the pipe's next bytes (its Buffer Offset is not the
  /// bytes already taken, or it wants more than are left): the caller must not send the batch.
  [[nodiscard]] bool mark(std::span<datamover::PduOut> pdus);
  /// Task `itt` ended: its pipe (if any) comes back, kept when empty, else closed.
  void end(iscsi::Itt itt);
  /// Data-In bytes mark() pointed at pipes since the last call (then 0 again).
  [[nodiscard]] std::uint64_t take_marked_bytes() noexcept { return std::exchange(marked_bytes_, 0); }
  /// Pipes owned by tasks now.
  [[nodiscard]] std::size_t in_use() const noexcept { return active_.size() + lent_.size(); }
  /// Pipes kept empty for later READs.
  [[nodiscard]] std::size_t spare() const noexcept { return spare_.size(); }

 private:
  struct Active {
    iscsi::Itt itt{0};
    SplicePipe pipe;
    std::size_t bytes = 0;  // what the backend put in
    std::size_t taken = 0;  // what marked PDUs take
  };
  void give_back(SplicePipe p) noexcept;

  std::vector<SplicePipe> spare_;
  std::vector<SplicePipe> lent_;  // taken, before started()
  std::vector<Active> active_;
  std::size_t created_ = 0;       // pipes open (spare, lent, active)
  std::uint64_t marked_bytes_ = 0;
};

}  // namespace iserkit::target
