// FUSE low-level operations for the iSCSI namespace view: lookup/getattr/readdir over the portal's
// targets and LUNs, read/write → READ/WRITE, fsync → SYNCHRONIZE CACHE, fallocate → UNMAP / WRITE
// SAME, copy_file_range → EXTENDED COPY (lun_copy.hpp), lseek SEEK_DATA/SEEK_HOLE and st_blocks →
// GET LBA STATUS, xattrs from INQUIRY/VPD, the per-target "info" file and the root ".rescan" file.
//
// NOTES ON THE THREAD MODEL
//
// Two kinds of threads. libfuse's multithreaded loop (fuse_session_loop_mt) runs up to
// --max-threads worker threads that read requests from /dev/fuse and call the operations below.
// One loop thread runs the io_context on which the PortalView, every iSCSI Session and every
// LunHandle live (sessions are single-threaded: initiator/session.hpp).
//
// A worker never touches the view or a session. It hands the request to the loop with co_spawn
// (a post; it never blocks the loop) and returns — the coroutine on the loop does the SCSI work and
// replies with fuse_reply_*() from the loop thread (the low-level API allows replying from any
// thread). So any number of reads, fsyncs, lookups … are in flight at once, limited only by the
// session's queue depth; none of them holds a lock. The namespace tree, the per-LUN write range
// locks and the sessions are touched from the loop thread only, so there is no global lock on any
// path — the loop is the serialization point, and it never blocks: all SCSI I/O is asynchronous.
//
// One exception, for zero copy: a WRITE's payload lives in the worker's receive buffer, which
// libfuse reuses as soon as the operation returns. So for LUN writes the worker waits (on a
// future, not holding any lock) until the coroutine on the loop has finished with the buffer, then
// replies itself. The data goes from libfuse's buffer straight into the Data-Out PDUs (aligned
// writes) — no copy on our side over TCP (over iSER the session bounces it: libfuse's buffer is
// not registered); concurrency for writes is the number of workers (libfuse starts more, up to
// --max-threads, when all are busy). With --splice-writes a payload of a page or more waits in
// libfuse's per-thread pipe instead: the worker leases a buffer from the LUN's session pool (a
// round trip to the loop), read(2)s the payload into it and hands the WRITE to the loop, which
// replies — the worker is free at once and no copy of ours happens on any transport. Reads are
// the reverse: the loop reads into a pooled buffer and fuse_reply_buf() sends from it.
//
// A stat (getattr, lookup) of a LUN file may start its mapped-block count for st_blocks: GET LBA
// STATUS commands in a coroutine detached on the loop (one per LUN at a time, lun_io.hpp); the
// stat's coroutine waits for it on a Completion with a 1 s timer, never blocking the loop.
// Readdir serves a snapshot taken in opendir (on the loop), so the worker needs no shared state.
// Objects a request leaves behind (open files, directory snapshots) are freed on the loop thread.
// FuseContext::in_flight counts requests handed to the loop; at unmount main.cpp waits for it to
// reach 0 before it destroys the FUSE session.
#include "fuse_fs/fuse_ops.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "fuse_fs/lun_copy.hpp"
#include "fuse_fs/lun_io.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::fuse_fs {

// What an open file handle (fi->fh) points at.
struct OpenFile {
  NodeKind kind = NodeKind::lun;
  std::shared_ptr<LunState> lun;  // lun files
  std::string content;            // info files: the JSON at open time
  bool fua = false;               // O_DSYNC/O_SYNC opens write with FUA
};

namespace {

constexpr std::size_t kib = 1024;

// An opendir snapshot (fi->fh of a directory).
struct DirEntry {
  std::string name;
  Ino ino = 0;
  mode_t type = S_IFDIR;
};
using DirSnapshot = std::vector<DirEntry>;

FuseContext& ctx(fuse_req_t req) { return *static_cast<FuseContext*>(fuse_req_userdata(req)); }

// Runs `op` on the loop; it must reply to `req`. If it throws (only bad_alloc can), EIO is replied.
void spawn(FuseContext& c, fuse_req_t req, Awaitable<void> op) {
  c.in_flight.fetch_add(1);
  asio::co_spawn(c.view.executor(), std::move(op), [&c, req](std::exception_ptr e) {
    if (e) {
      log::error("fuse: request failed with an exception");
      fuse_reply_err(req, EIO);
    }
    c.in_flight.fetch_sub(1);
  });
}

// Frees `p` on the loop thread (a LunState's last reference must go where its session lives).
template <class T>
void delete_on_loop(FuseContext& c, T* p) {
  asio::post(c.view.executor(), [p] { delete p; });
}

// How long a stat of a LUN file waits for its mapped-block count (lun_mapped_bytes) before it
// answers the last count or the capacity; the count goes on for the next stat.
constexpr std::chrono::milliseconds count_wait{1000};

// `allocated_bytes`: what st_blocks shows for a LUN file (lun_mapped_bytes); the capacity when absent.
struct stat make_stat(FuseContext& c, const Node& n, std::optional<std::uint64_t> allocated_bytes = std::nullopt) {
  struct stat st {};
  st.st_ino = n.ino;
  st.st_uid = c.options.uid;
  st.st_gid = c.options.gid;
  st.st_atim = st.st_mtim = st.st_ctim = c.options.mount_time;
  st.st_blksize = 4096;
  const mode_t w = c.options.read_only ? 0 : S_IWUSR;
  switch (n.kind) {
    case NodeKind::root:
    case NodeKind::target:
      st.st_mode = S_IFDIR | 0555;
      st.st_nlink = 2;
      break;
    case NodeKind::rescan:
      st.st_mode = S_IFREG | 0200;  // write-only control file, owner only
      st.st_nlink = 1;
      break;
    case NodeKind::info:
      st.st_mode = S_IFREG | 0444;
      st.st_nlink = 1;
      st.st_size = static_cast<off_t>(c.view.info_json(n.parent).size());
      break;
    case NodeKind::lun: {
      st.st_mode = S_IFREG | 0444 | w;
      st.st_nlink = 1;
      st.st_size = static_cast<off_t>(n.size_bytes);
      // st_blocks is in 512-byte units whatever st_blksize says (stat(2)).
      st.st_blocks = static_cast<blkcnt_t>((allocated_bytes.value_or(n.size_bytes) + 511) / 512);
      if (auto l = c.view.lun(n.ino); l && l->metadata.block_size_bytes > 4096)
        st.st_blksize = static_cast<blksize_t>(l->metadata.block_size_bytes);
      break;
    }
  }
  return st;
}

// The attributes of `node`; for a LUN file st_blocks counts its mapped blocks (GET LBA STATUS,
// cached; lun_io.hpp).
Awaitable<struct stat> stat_of(FuseContext& c, const Node& node) {
  if (node.kind != NodeKind::lun) co_return make_stat(c, node);
  const Node n = node;  // copied before the count: the tree may change meanwhile (a LUN node is small)
  std::optional<std::uint64_t> allocated;
  if (auto lun = c.view.lun(n.ino)) allocated = co_await lun_mapped_bytes(c.view, std::move(lun), count_wait);
  co_return make_stat(c, n, allocated);
}

Awaitable<fuse_entry_param> make_entry(FuseContext& c, const Node& n) {
  fuse_entry_param e{};
  e.ino = n.ino;
  e.generation = 1;  // inodes are never reused (namespace_tree.hpp)
  e.attr = co_await stat_of(c, n);
  e.attr_timeout = c.options.attr_timeout_seconds;
  e.entry_timeout = c.options.attr_timeout_seconds;
  co_return e;
}

bool is_dir(const Node& n) { return n.kind == NodeKind::root || n.kind == NodeKind::target; }

// Refreshes directory `dir` when its listing is stale. Returns the refresh error (the old listing
// stays usable after a failed refresh; see PortalView).
Awaitable<std::error_code> refresh(FuseContext& c, const Node& dir) {
  if (dir.kind == NodeKind::root) {
    auto r = co_await c.view.refresh_root(false);
    co_return r ? std::error_code{} : r.error();
  }
  auto r = co_await c.view.refresh_target(dir.ino, false);
  co_return r ? std::error_code{} : r.error();
}

// ---- namespace ----

Awaitable<void> do_lookup(FuseContext& c, fuse_req_t req, Ino parent, std::string name) {
  const Node* p = c.view.tree().get(parent);
  if (p == nullptr || !p->present || !is_dir(*p)) {
    fuse_reply_err(req, p == nullptr || !p->present ? ENOENT : ENOTDIR);
    co_return;
  }
  // A name already listed is answered at once; an unknown one refreshes a stale listing first
  // (so a new target or LUN is found without waiting for the cache time of a readdir).
  const Node* n = c.view.tree().lookup(parent, name);
  std::error_code failed;
  if (n == nullptr) {
    failed = co_await refresh(c, *p);
    n = c.view.tree().lookup(parent, name);
  }
  if (n == nullptr) {
    // A target we could not list: say why rather than "no such file".
    fuse_reply_err(req, failed && p->kind == NodeKind::target && name != NamespaceTree::info_name ? fuse_errno(failed)
                                                                                                   : ENOENT);
    co_return;
  }
  const auto e = co_await make_entry(c, *n);
  fuse_reply_entry(req, &e);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  spawn(ctx(req), req, do_lookup(ctx(req), req, parent, name));
}

void op_forget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }
void op_forget_multi(fuse_req_t req, size_t, fuse_forget_data*) { fuse_reply_none(req); }

Awaitable<void> do_getattr(FuseContext& c, fuse_req_t req, Ino ino) {
  const Node* n = c.view.tree().get(ino);
  if (n == nullptr || !n->present) {
    fuse_reply_err(req, ENOENT);
    co_return;
  }
  const auto st = co_await stat_of(c, *n);
  fuse_reply_attr(req, &st, c.options.attr_timeout_seconds);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) { spawn(ctx(req), req, do_getattr(ctx(req), req, ino)); }

Awaitable<void> do_setattr(FuseContext& c, fuse_req_t req, Ino ino, struct stat attr, int to_set) {
  const Node* n = c.view.tree().get(ino);
  if (n == nullptr || !n->present) {
    fuse_reply_err(req, ENOENT);
    co_return;
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    fuse_reply_err(req, EPERM);
    co_return;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    // A LUN has a fixed size, like a block device: only "truncate" to its own size succeeds.
    // The control file accepts any size (shells open it with O_TRUNC).
    if (n->kind == NodeKind::lun && c.options.read_only) {
      fuse_reply_err(req, EROFS);
      co_return;
    }
    if ((n->kind == NodeKind::lun && static_cast<std::uint64_t>(attr.st_size) != n->size_bytes) ||
        n->kind == NodeKind::info || is_dir(*n)) {
      fuse_reply_err(req, n->kind == NodeKind::lun ? EINVAL : EACCES);
      co_return;
    }
  }
  // Times are accepted and not kept (touch works); the view shows the mount time.
  const auto st = co_await stat_of(c, *n);
  fuse_reply_attr(req, &st, c.options.attr_timeout_seconds);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  spawn(ctx(req), req, do_setattr(ctx(req), req, ino, *attr, to_set));
}

Awaitable<void> do_opendir(FuseContext& c, fuse_req_t req, Ino ino, fuse_file_info fi) {
  const Node* n = c.view.tree().get(ino);
  if (n == nullptr || !n->present) {
    fuse_reply_err(req, ENOENT);
    co_return;
  }
  if (!is_dir(*n)) {
    fuse_reply_err(req, ENOTDIR);
    co_return;
  }
  const auto failed = co_await refresh(c, *n);
  if (failed && n->kind == NodeKind::target && !c.view.target(ino)->scanned) {
    fuse_reply_err(req, fuse_errno(failed));  // never listed: the target is unreachable
    co_return;
  }
  auto* snap = new DirSnapshot{{".", ino, S_IFDIR}, {"..", n->parent, S_IFDIR}};
  for (const Node* child : c.view.tree().list(ino)) {
    snap->push_back({child->name, child->ino, is_dir(*child) ? mode_t{S_IFDIR} : mode_t{S_IFREG}});
  }
  fi.fh = reinterpret_cast<std::uint64_t>(snap);
  if (fuse_reply_open(req, &fi) != 0) delete snap;  // the request was interrupted
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  spawn(ctx(req), req, do_opendir(ctx(req), req, ino, *fi));
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  const auto* snap = reinterpret_cast<const DirSnapshot*>(fi->fh);
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (std::size_t i = off < 0 ? 0 : static_cast<std::size_t>(off); snap != nullptr && i < snap->size(); ++i) {
    struct stat st {};
    st.st_ino = (*snap)[i].ino;
    st.st_mode = (*snap)[i].type;
    const std::size_t need = fuse_add_direntry(req, buf.data() + used, size - used, (*snap)[i].name.c_str(), &st,
                                               static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<DirSnapshot*>(fi->fh);  // plain strings: no loop-thread state
  fuse_reply_err(req, 0);
}

// ---- files ----

// Opens node `ino`; with `create`, the request is a FUSE_CREATE (open with O_CREAT) and the
// reply carries the entry too.
Awaitable<void> do_open(FuseContext& c, fuse_req_t req, Ino ino, fuse_file_info fi, bool create = false) {
  const Node* n = c.view.tree().get(ino);
  if (n == nullptr || !n->present) {
    fuse_reply_err(req, ENOENT);
    co_return;
  }
  const bool writing = (fi.flags & O_ACCMODE) != O_RDONLY;
  auto f = std::make_unique<OpenFile>();
  f->kind = n->kind;
  switch (n->kind) {
    case NodeKind::root:
    case NodeKind::target:
      fuse_reply_err(req, EISDIR);
      co_return;
    case NodeKind::info: {
      if (writing) {
        fuse_reply_err(req, EACCES);
        co_return;
      }
      const Ino dir = n->parent;
      (void)co_await c.view.refresh_target(dir, false);  // log in, so the parameters are there
      f->content = c.view.info_json(dir);
      fi.direct_io = 1;  // the size changes with the session state
      break;
    }
    case NodeKind::rescan:
      fi.direct_io = 1;
      break;
    case NodeKind::lun: {
      if (writing && c.options.read_only) {
        fuse_reply_err(req, EROFS);
        co_return;
      }
      f->lun = c.view.lun(ino);
      if (!f->lun) {
        fuse_reply_err(req, ENOENT);
        co_return;
      }
      f->fua = (fi.flags & O_DSYNC) != 0;
      // O_DIRECT opens (and loop devices with --direct-io=on) bypass the page cache through the
      // kernel's direct_IO path, which keeps async submissions (io_uring, AIO, loop) in flight
      // together (FUSE_CAP_ASYNC_DIO); FOPEN_DIRECT_IO would make each one synchronous. So
      // direct_io is set only for --direct-io, which keeps every open — buffered ones too — out
      // of the page cache. Buffered opens drop cached pages at open (another initiator may have
      // written the LUN).
      fi.direct_io = c.options.direct_io ? 1 : 0;
      fi.keep_cache = 0;
      break;
    }
  }
  fi.fh = reinterpret_cast<std::uint64_t>(f.get());
  {
    // Registered before the reply: FUSE_RELEASE may arrive on another thread as soon as it is sent.
    std::lock_guard lock(c.open_files_mutex);
    c.open_files.insert(f.get());
  }
  int sent = 0;
  if (create) {
    const auto e = co_await make_entry(c, *n);
    sent = fuse_reply_create(req, &e, &fi);
  } else {
    sent = fuse_reply_open(req, &fi);
  }
  if (sent == 0) {
    f.release();
  } else {  // interrupted: no RELEASE will come; unique_ptr frees it here, on the loop
    std::lock_guard lock(c.open_files_mutex);
    c.open_files.erase(f.get());
  }
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { spawn(ctx(req), req, do_open(ctx(req), req, ino, *fi)); }

// open(O_CREAT) of a name that exists opens it (fio, dd and shells pass O_CREAT); the view
// cannot make new files.
Awaitable<void> do_create(FuseContext& c, fuse_req_t req, Ino parent, std::string name, fuse_file_info fi) {
  const Node* p = c.view.tree().get(parent);
  if (p == nullptr || !p->present || !is_dir(*p)) {
    fuse_reply_err(req, p == nullptr || !p->present ? ENOENT : ENOTDIR);
    co_return;
  }
  const Node* n = c.view.tree().lookup(parent, name);
  if (n == nullptr) {
    (void)co_await refresh(c, *p);
    n = c.view.tree().lookup(parent, name);
  }
  if (n == nullptr || (fi.flags & O_EXCL) != 0) {
    fuse_reply_err(req, n == nullptr ? EACCES : EEXIST);
    co_return;
  }
  co_await do_open(c, req, n->ino, fi, true);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t, fuse_file_info* fi) {
  spawn(ctx(req), req, do_create(ctx(req), req, parent, name, *fi));
}

Awaitable<void> do_read(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> lun, std::uint64_t off, std::size_t size) {
  auto r = co_await lun_read(c.view, std::move(lun), off, size);
  if (!r) {
    fuse_reply_err(req, fuse_errno(r.error()));
    co_return;
  }
  fuse_reply_buf(req, reinterpret_cast<const char*>(r->data()), r->length);
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  switch (f->kind) {
    case NodeKind::lun:
      spawn(ctx(req), req, do_read(ctx(req), req, f->lun, static_cast<std::uint64_t>(off), size));
      return;
    case NodeKind::info: {
      // Replied from a copy: once the reply is written the kernel may end the read, the file's
      // RELEASE may run on another worker and its delete on the loop while fuse_reply_buf() has
      // not returned yet (ASan's writev check reads the buffer after the system call returns).
      // An info document is a few KiB of JSON, not payload.
      const auto o = std::min<std::size_t>(static_cast<std::size_t>(off), f->content.size());
      const std::string part = f->content.substr(o, std::min(size, f->content.size() - o));
      fuse_reply_buf(req, part.data(), part.size());
      return;
    }
    default:
      fuse_reply_buf(req, nullptr, 0);
  }
}

Awaitable<void> do_rescan(FuseContext& c, fuse_req_t req, std::size_t size) {
  auto r = co_await c.view.rescan_all();
  if (!r) {
    fuse_reply_err(req, fuse_errno(r.error()));
    co_return;
  }
  fuse_reply_write(req, size);
}

// Writes `data` (libfuse's receive buffer, valid only until the operation returns) and waits here
// — a worker, not the loop — until the WRITE is done with it; replies from the worker.
void write_in_place(FuseContext& c, fuse_req_t req, const OpenFile& f, std::span<const std::byte> data, off_t off) {
  std::promise<Result<std::size_t>> done;
  auto result = done.get_future();
  c.in_flight.fetch_add(1);
  asio::co_spawn(c.view.executor(), lun_write(c.view, f.lun, static_cast<std::uint64_t>(off), data, f.fua),
                 [&c, &done](std::exception_ptr e, Result<std::size_t> r) {
                   c.in_flight.fetch_sub(1);  // before set_value: the worker may return at once
                   done.set_value(e ? Result<std::size_t>(fail(std::make_error_code(std::errc::not_enough_memory)))
                                    : std::move(r));
                 });
  auto r = result.get();
  if (!r) {
    fuse_reply_err(req, fuse_errno(r.error()));
  } else {
    fuse_reply_write(req, *r);
  }
}

// A WRITE whose payload is in a buffer of ours: runs on the loop and replies from there.
Awaitable<void> do_write_owned(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> lun, std::uint64_t off,
                               PooledBuffer payload, bool fua) {
  auto r = co_await lun_write(c.view, std::move(lun), off, payload.bytes(), fua);
  if (!r) {
    fuse_reply_err(req, fuse_errno(r.error()));
  } else {
    fuse_reply_write(req, *r);
  }
}

// Leases a payload buffer from the LUN's session pool (on the loop; the worker waits).
Result<PooledBuffer> lease_payload(FuseContext& c, std::shared_ptr<LunState> lun, std::size_t size) {
  std::promise<Result<PooledBuffer>> done;
  auto result = done.get_future();
  asio::co_spawn(c.view.executor(), lun_payload_buffer(c.view, std::move(lun), size),
                 [&done](std::exception_ptr e, Result<PooledBuffer> r) {
                   done.set_value(e ? Result<PooledBuffer>(fail(std::make_error_code(std::errc::not_enough_memory)))
                                    : std::move(r));
                 });
  return result.get();
}

void op_write_buf(fuse_req_t req, fuse_ino_t, fuse_bufvec* bufv, off_t off, fuse_file_info* fi) {
  auto& c = ctx(req);
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  const std::size_t size = fuse_buf_size(bufv);
  if (f->kind == NodeKind::rescan) {
    spawn(c, req, do_rescan(c, req, size));  // the content does not matter; libfuse drains its pipe
    return;
  }
  if (f->kind != NodeKind::lun || off < 0) {
    fuse_reply_err(req, f->kind != NodeKind::lun ? EBADF : EINVAL);
    return;
  }
  if (c.options.read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  const fuse_buf& first = bufv->buf[bufv->idx];
  const bool in_pipe = (first.flags & FUSE_BUF_IS_FD) != 0;
  if (!in_pipe && bufv->count - bufv->idx == 1) {
    // libfuse read the request into its own memory (no splice, or a write under a page): write
    // from there (zero copy over TCP; over iSER the session bounces it, counted).
    write_in_place(c, req, *f, {static_cast<const std::byte*>(first.mem) + bufv->off, size}, off);
    return;
  }
  // The payload still waits in libfuse's pipe (splicing): read(2) it straight into a buffer
  // of the LUN's session pool — registered memory on iSER — so no copy of ours happens on any
  // transport, and the worker is free at once: the loop writes and replies.
  auto payload = lease_payload(c, f->lun, size);
  if (!payload) {
    fuse_reply_err(req, fuse_errno(payload.error()));
    return;
  }
  // FUSE_BUFVEC_INIT(size) spelled out: the macro is a C99 compound literal, an extension in C++
  // (clang's -Wc99-extensions).
  fuse_bufvec dst{};
  dst.count = 1;
  dst.buf[0].size = size;
  dst.buf[0].flags = static_cast<fuse_buf_flags>(0);
  dst.buf[0].fd = -1;
  dst.buf[0].mem = payload->data();
  const ssize_t n = fuse_buf_copy(&dst, bufv, static_cast<fuse_buf_copy_flags>(0));
  if (n < 0 || static_cast<std::size_t>(n) != size) {
    log::warn("fuse: write: payload from the FUSE pipe: {} of {} bytes", n, size);
    fuse_reply_err(req, EIO);
    return;
  }
  if (in_pipe) {
    c.spliced_writes.fetch_add(1, std::memory_order_relaxed);  // read(2) from the pipe: a kernel copy
  } else {
    count_payload_copy(size);  // several memory pieces (libfuse 3.14 never hands these): a copy of ours
  }
  spawn(c, req, do_write_owned(c, req, f->lun, static_cast<std::uint64_t>(off), std::move(*payload), f->fua));
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  fuse_reply_err(req, 0);  // writes are write-through: nothing is held back at close
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  {
    std::lock_guard lock(ctx(req).open_files_mutex);
    ctx(req).open_files.erase(f);
  }
  delete_on_loop(ctx(req), f);
  fuse_reply_err(req, 0);
}

Awaitable<void> do_fsync(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> lun) {
  auto r = co_await lun_flush(c.view, std::move(lun));
  fuse_reply_err(req, r ? 0 : fuse_errno(r.error()));
}

void op_fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  if (f->kind != NodeKind::lun || ctx(req).options.read_only) {
    fuse_reply_err(req, 0);
    return;
  }
  spawn(ctx(req), req, do_fsync(ctx(req), req, f->lun));  // SBC-4 §5.27 SYNCHRONIZE CACHE
}

Awaitable<void> do_fallocate(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> lun, int mode,
                             std::uint64_t off, std::uint64_t len) {
  const std::uint64_t size = lun->metadata.size_bytes();
  Result<void> r;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    r = co_await lun_clear(c.view, std::move(lun), off, len, ClearMode::punch_hole);
  } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    if (!(mode & FALLOC_FL_KEEP_SIZE) && (off > size || len > size - off)) {
      fuse_reply_err(req, EFBIG);  // a LUN cannot grow
      co_return;
    }
    r = co_await lun_clear(c.view, std::move(lun), off, len, ClearMode::zero_range);
  } else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
    // Preallocation: every block of a LUN already exists; growing it is impossible.
    fuse_reply_err(req, mode == 0 && (off > size || len > size - off) ? EFBIG : 0);
    co_return;
  } else {
    fuse_reply_err(req, EOPNOTSUPP);  // collapse/insert range, unshare, punch without KEEP_SIZE
    co_return;
  }
  fuse_reply_err(req, r ? 0 : fuse_errno(r.error()));
}

void op_fallocate(fuse_req_t req, fuse_ino_t, int mode, off_t off, off_t len, fuse_file_info* fi) {
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  if (f->kind != NodeKind::lun || off < 0 || len <= 0) {
    fuse_reply_err(req, f->kind != NodeKind::lun ? ENODEV : EINVAL);
    return;
  }
  if (ctx(req).options.read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  spawn(ctx(req), req,
        do_fallocate(ctx(req), req, f->lun, mode, static_cast<std::uint64_t>(off), static_cast<std::uint64_t>(len)));
}

Awaitable<void> do_copy_file_range(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> in, std::uint64_t off_in,
                                   std::shared_ptr<LunState> out, std::uint64_t off_out, std::uint64_t len, bool fua) {
  auto r = co_await lun_copy(c.view, std::move(in), off_in, std::move(out), off_out, len, fua);
  if (!r) {
    // errc::not_supported → EOPNOTSUPP: the kernel copies this request through read/write itself.
    fuse_reply_err(req, r.error() == make_error_code(errc::not_supported) ? EOPNOTSUPP : fuse_errno(r.error()));
    co_return;
  }
  fuse_reply_write(req, *r);
}

// copy_file_range(2) between two LUN files: EXTENDED COPY on the target (lun_copy.hpp). Anything
// else (an info file, flags) gets EOPNOTSUPP or EINVAL, never ENOSYS, which would make the kernel
// stop asking for the whole mount.
void op_copy_file_range(fuse_req_t req, fuse_ino_t, off_t off_in, fuse_file_info* fi_in, fuse_ino_t, off_t off_out,
                        fuse_file_info* fi_out, size_t len, int flags) {
  auto* in = reinterpret_cast<OpenFile*>(fi_in->fh);
  auto* out = reinterpret_cast<OpenFile*>(fi_out->fh);
  if (flags != 0 || off_in < 0 || off_out < 0) {
    fuse_reply_err(req, EINVAL);  // copy_file_range(2): flags must be 0
    return;
  }
  if (in->kind != NodeKind::lun || out->kind != NodeKind::lun) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  if (ctx(req).options.read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  spawn(ctx(req), req,
        do_copy_file_range(ctx(req), req, in->lun, static_cast<std::uint64_t>(off_in), out->lun,
                           static_cast<std::uint64_t>(off_out), len, out->fua));
}

Awaitable<void> do_lseek(FuseContext& c, fuse_req_t req, std::shared_ptr<LunState> lun, std::uint64_t off,
                         SeekWhence whence) {
  auto r = co_await lun_seek(c.view, std::move(lun), off, whence);
  if (!r) {
    fuse_reply_err(req, ENXIO);  // lun_seek fails with nothing else (lseek(2): ENXIO only)
    co_return;
  }
  fuse_reply_lseek(req, static_cast<off_t>(*r));
}

// The kernel sends only SEEK_DATA and SEEK_HOLE here (the others it answers itself). LUN files
// answer from GET LBA STATUS; the small files are all data.
void op_lseek(fuse_req_t req, fuse_ino_t, off_t off, int whence, fuse_file_info* fi) {
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  if ((whence != SEEK_DATA && whence != SEEK_HOLE) || off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  const SeekWhence w = whence == SEEK_DATA ? SeekWhence::data : SeekWhence::hole;
  if (f->kind == NodeKind::lun) {
    spawn(ctx(req), req, do_lseek(ctx(req), req, f->lun, static_cast<std::uint64_t>(off), w));
    return;
  }
  const auto size = static_cast<off_t>(f->content.size());
  if (off >= size) {
    fuse_reply_err(req, ENXIO);
  } else {
    fuse_reply_lseek(req, w == SeekWhence::data ? off : size);
  }
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs s {};
  s.f_bsize = 4096;
  s.f_frsize = 4096;
  s.f_namemax = 255;
  fuse_reply_statfs(req, &s);
}

// ---- extended attributes ----

void reply_xattr_value(fuse_req_t req, const std::string& value, std::size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (size < value.size()) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

Awaitable<void> do_getxattr(FuseContext& c, fuse_req_t req, Ino ino, std::string name, std::size_t size) {
  auto lun = c.view.lun(ino);
  const auto value = lun ? xattr_value(lun->metadata, name) : std::nullopt;
  if (!value) {
    fuse_reply_err(req, ENODATA);
    co_return;
  }
  reply_xattr_value(req, *value, size);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  spawn(ctx(req), req, do_getxattr(ctx(req), req, ino, name, size));
}

Awaitable<void> do_listxattr(FuseContext& c, fuse_req_t req, Ino ino, std::size_t size) {
  std::string list;
  if (auto lun = c.view.lun(ino)) {
    for (const auto& n : xattr_names(lun->metadata)) {
      list += n;
      list += '\0';
    }
  }
  reply_xattr_value(req, list, size);
  co_return;
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  spawn(ctx(req), req, do_listxattr(ctx(req), req, ino, size));
}

void op_setxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { fuse_reply_err(req, ENOTSUP); }
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, ENOTSUP); }

void op_init(void* userdata, fuse_conn_info* conn) {
  // Splice from /dev/fuse only when MountOptions::splice_writes says so (--splice-writes: always,
  // or auto with an iser:// portal; libfuse turns it on by default once a write_buf handler
  // exists). See README "Write payload" for what it costs and saves.
  if (static_cast<FuseContext*>(userdata)->options.splice_writes && (conn->capable & FUSE_CAP_SPLICE_READ)) {
    conn->want |= FUSE_CAP_SPLICE_READ;
  } else {
    conn->want &= ~FUSE_CAP_SPLICE_READ;
  }
  // FOPEN-less O_TRUNC: shells' "echo > .rescan" and tools opening a LUN with O_TRUNC behave as on
  // a block device (the flag is ignored) instead of failing a truncate.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // Several direct I/Os of one io_uring/AIO submitter in flight at once.
  if (conn->capable & FUSE_CAP_ASYNC_DIO) conn->want |= FUSE_CAP_ASYNC_DIO;
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;  // write-through: fsync and O_DIRECT mean what they say
  conn->max_write = 1024 * kib;             // libfuse caps this at its receive buffer (1 MiB)
  if (conn->want & FUSE_CAP_SPLICE_READ) {
    // libfuse splices only into a pipe that holds max_write + 4 KiB; 1 MiB + 4 KiB rounds to a
    // 2 MiB pipe, beyond the default fs.pipe-max-size (1 MiB) without CAP_SYS_RESOURCE, and libfuse
    // would silently never splice. 512 KiB is also the iSER default transfer size per command.
    conn->max_write = 512 * kib;
  }
  conn->max_readahead = std::min<unsigned>(conn->max_readahead, 1024 * kib);
  conn->max_background = 64;                // readahead and async direct I/O requests in flight
  conn->congestion_threshold = 48;
}

}  // namespace

void free_open_files(FuseContext& c) {
  std::unordered_set<OpenFile*> left;
  {
    std::lock_guard lock(c.open_files_mutex);
    left.swap(c.open_files);
  }
  for (OpenFile* f : left) delete f;
}

const fuse_lowlevel_ops& fuse_operations() noexcept {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.setattr = op_setattr;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.releasedir = op_releasedir;
    o.open = op_open;
    o.create = op_create;
    o.read = op_read;
    o.write_buf = op_write_buf;
    o.flush = op_flush;
    o.release = op_release;
    o.fsync = op_fsync;
    o.fallocate = op_fallocate;
    o.lseek = op_lseek;
    o.copy_file_range = op_copy_file_range;
    o.statfs = op_statfs;
    o.getxattr = op_getxattr;
    o.listxattr = op_listxattr;
    o.setxattr = op_setxattr;
    o.removexattr = op_removexattr;
    return o;
  }();
  return ops;
}

}  // namespace iserkit::fuse_fs
