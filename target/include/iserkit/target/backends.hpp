// The concrete block backends (layer 5): MemoryBackend (sparse, in memory), UringBackend
// (io_uring over a regular file or block device) and RbdBackend (a Ceph RBD image, librbd), plus the helper that opens a file or device and
// learns its size. See block_backend.hpp for the contract they implement.
//
// io_uring and threads: a UringBackend has no ring of its own. Each io_context that calls it gets
// one ring (an Asio service, created on first use from a coroutine running on that io_context):
// the ring signals an eventfd that the io_context waits on with posix::stream_descriptor while
// operations are in flight, and submissions made during one turn of the loop are submitted
// together by one posted flush. Nothing else is required of the caller: run the io_context as
// usual; io_context::run() returns when no I/O is in flight. Each io_context must be run by one
// thread at a time (the target's one-io_context-per-thread model).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>
#include <memory>

#include "iserkit/common/result.hpp"
#include "iserkit/target/block_backend.hpp"

namespace iserkit::target {

/// Options for an in-memory LUN.
struct MemoryBackendOptions {
  std::uint64_t size_bytes = 0;           ///< capacity in bytes; rounded down to a block multiple
  std::uint32_t block_size_bytes = 512;   ///< 512 or 4096
  bool read_only = false;
};

/// A sparse in-memory backend: memory is allocated in 1 MiB chunks on first write, so a large LUN
/// costs nothing until written; discard frees whole chunks. Thread-safe (one mutex). Completes
/// every operation synchronously (no suspension). For tests and demos.
/// Errors: EROFS on writes when read_only.
std::shared_ptr<BlockBackend> make_memory_backend(const MemoryBackendOptions& options);

/// Options for opening a file or block device.
struct OpenBackendOptions {
  std::filesystem::path path;            ///< regular file or block device; must exist
  bool read_only = false;                ///< open O_RDONLY and refuse writes
  std::uint32_t block_size_bytes = 512;  ///< logical block size to expose: 512 or 4096
  bool use_direct_io = true;             ///< also open an O_DIRECT fd, used for requests meeting its alignment
};

/// Opens `options.path` and returns an io_uring backend over it. The size comes from fstat (files)
/// or BLKGETSIZE64 (block devices) and is rounded down to a block multiple; creating or sizing the
/// file is the caller's job. Discard: fallocate(PUNCH_HOLE|KEEP_SIZE) (files and block devices),
/// falling back to writing zeroes if the file system refuses; write_zeroes: FALLOC_FL_ZERO_RANGE,
/// then hole punch, then writing zeroes. If O_DIRECT cannot be opened only the buffered fd
/// is used. A regular file on a RAM file system (tmpfs, ramfs) is read and written inline with
/// preadv2/pwritev2 on the caller's thread, without O_DIRECT (memory copies; io_uring would hand
/// each request to a kernel worker thread there); flush, discard and write_zeroes still go through
/// io_uring. copy_from() (can_copy_in_kernel) copies from another io_uring backend inside the
/// kernel: linked io_uring splices file → pipe → file, the source through the page cache (through
/// O_DIRECT when KernelCopy::proceed is set), the destination through its O_DIRECT fd; EOPNOTSUPP
/// for any other source, overlapping ranges of one file, or a destination range O_DIRECT cannot
/// take (target/src/backend/uring_backend.cpp).
/// Errors: the errno of open/fstat/ioctl; EINVAL for a block size other than 512/4096 or a path
/// that is neither a regular file nor a block device.
Result<std::shared_ptr<BlockBackend>> open_uring_backend(const OpenBackendOptions& options);

/// Options for a Ceph RBD image (librbd).
struct RbdBackendOptions {
  std::string pool;                                      ///< RADOS pool holding the image
  std::string image;                                     ///< image name in the pool
  std::filesystem::path ceph_conf = "/etc/ceph/ceph.conf";  ///< monitors, keyring location
  std::string ceph_id = "admin";                         ///< client.<id> (its key from the keyring)
  bool read_only = false;                                ///< open the image read-only and refuse writes
  std::uint32_t block_size_bytes = 512;                  ///< logical block size to expose: 512 or 4096
  std::chrono::seconds connect_timeout{15};              ///< how long connecting to the monitors may take
  /// The image is served by several gateways at once (target/README.md "Two gateways, one RBD
  /// image"): librbd's cache is turned off (rbd_cache=false), so a write is on the OSDs when it
  /// completes and no gateway serves reads from a cache another gateway's writes made stale.
  bool shared_by_gateways = false;
};

/// Connects to the Ceph cluster of `options.ceph_conf` as client.`ceph_id` (one connection per
/// conf and id, shared by every image opened with them) and opens `pool`/`image`. Reads, writes
/// (FUA = write then flush), flush, discard and write_zeroes are librbd aio calls on the caller's
/// buffers, completed on the caller's io_context; the allocation map comes from
/// rbd_diff_iterate2. Thin, discard zeroes (rbd_skip_partial_discard=false), volatile cache
/// when librbd's cache is on (rbd_cache; off with shared_by_gateways). The size is the image's,
/// rounded down to a block multiple, read once. capabilities().storage_id is
/// "rbd:<cluster fsid>/<pool id>/<image id>" (rbd_get_id), the same from every gateway.
/// Errors (errno codes): ENOENT no such pool or image; ETIMEDOUT / ENOTCONN no monitor within
/// connect_timeout; EACCES / EPERM refused credentials; EINVAL a bad block size or an empty
/// pool/image; std::errc::not_supported when this build has no librbd (WITH_RBD=OFF).
Result<std::shared_ptr<BlockBackend>> open_rbd_backend(const RbdBackendOptions& options);

/// The names of the images in `options.pool` (rbd_list2; images in the trash are not listed),
/// over the same shared connection as open_rbd_backend(); `options.image` is ignored.
/// Errors: as open_rbd_backend() (ENOENT: no such pool).
Result<std::vector<std::string>> list_rbd_images(const RbdBackendOptions& options);

/// True when this build has the RBD backend (librbd).
bool rbd_backend_available() noexcept;

/// Checks that io_uring can be used in this process (io_uring_queue_init on a small ring).
/// Returns: success, or the errno from io_uring_queue_init (e.g. ENOSYS, EPERM in sandboxes).
Result<void> probe_io_uring() noexcept;

}  // namespace iserkit::target
