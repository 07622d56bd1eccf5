// nbdkit-iserkit-plugin: an nbdkit plugin (API version 2) that serves one iSCSI LUN through the
// initiator library's BlockingClient, so nbdkit's CLI and filters (retry, cache, stats, log, …)
// work over iserkit sessions: `nbdkit iserkit url=iscsi://HOST:PORT/IQN/LUN`. Layer 6 (front end).
// SCSI: SBC-4 READ/WRITE (§5.16, §5.41), SYNCHRONIZE CACHE (§5.27), UNMAP (§5.32), WRITE SAME (16)
// (§5.50); MODE SENSE's WP and DPOFUA (§6.5.1); VPD 0xb2 LBPU (§6.6.6).
//
// THREAD MODEL: NBDKIT_THREAD_MODEL_PARALLEL with one iSCSI session per nbdkit connection. Each
// open() logs in with its own BlockingClient, whose methods may be called from any thread and run
// concurrently on the session (client.hpp, "THREADING"), so nbdkit's worker threads of one
// connection issue commands in parallel (many commands in flight, paced by the CmdSN window).
// Connections share nothing, so close() of one never disturbs another.
//
// ALIGNMENT: nbdkit counts bytes, SCSI logical blocks. block_size() reports the LUN's logical
// block as the minimum so clients align. Reads at any alignment are served (LunHandle::read_bytes
// reads edge blocks into a bounce buffer, which changes nothing on the LUN). Writes and zeroes
// that are not whole blocks are REJECTED with EINVAL, not read-modified-written: with parallel
// requests a read-modify-write of an edge block would race another write to the same block and
// lose data. Put `--filter=blocksize` in front for clients that send unaligned writes. Trims are
// rounded inward to whole blocks (a trim is advisory: not deallocating an edge is allowed).
//
// MULTI-CONN: not advertised. Each nbdkit connection is a separate iSCSI session; SBC-4 makes
// SYNCHRONIZE CACHE act on the logical unit, but the plugin cannot check that a third-party target
// honours that across I_T nexuses, so can_multi_conn stays false (nbdkit's default).
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/client.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

namespace {

namespace initiator = iserkit::initiator;

/// What config() and config_complete() gathered; read-only once nbdkit calls open(). A global
/// because nbdkit's config callbacks carry no context (the only global state in the plugin).
struct Config {
  std::optional<std::string> url_text;
  std::optional<std::string> chap_file;
  std::optional<initiator::Url> url;
  initiator::SessionOptions session;
};
Config config_;

/// One nbdkit connection: its own logged-in session and opened LUN.
struct Connection {
  std::unique_ptr<initiator::BlockingClient> client;
  std::uint32_t block_size_bytes = 0;
  std::uint64_t capacity_bytes = 0;
};

/// The errno for an initiator error (errors.hpp: SCSI sense through the one errno table,
/// transport errors as EIO/ENOTCONN/ETIMEDOUT).
int errno_of(std::error_code ec) noexcept {
  const int value = initiator::to_errno(ec);
  return value != 0 ? value : EIO;
}

/// Reports `ec` for `operation` in words (diagnosis.hpp) and sets nbdkit's errno; returns -1.
int fail(std::string_view operation, std::error_code ec, const Connection& c, std::uint64_t offset_bytes,
         std::uint64_t length_bytes) {
  const initiator::ErrorContext context{.program = initiator::Program::nbd,
                                        .url = config_.url,
                                        .chap = &config_.session.chap,
                                        .offset_bytes = offset_bytes,
                                        .length_bytes = length_bytes,
                                        .capacity_bytes = c.capacity_bytes};
  const std::string text = initiator::diagnose(ec, context).text();
  nbdkit_error("%.*s: %s: offset=%llu count=%llu", static_cast<int>(operation.size()), operation.data(),
               text.c_str(), static_cast<unsigned long long>(offset_bytes),
               static_cast<unsigned long long>(length_bytes));
  nbdkit_set_error(errno_of(ec));
  return -1;
}

/// Rejects a request that is not whole logical blocks (see ALIGNMENT above); returns -1.
int unaligned(std::string_view operation, const Connection& c, std::uint64_t offset_bytes, std::uint64_t count) {
  nbdkit_error("%.*s: not aligned to the LUN's %u-byte logical blocks: offset=%llu count=%llu; "
               "use --filter=blocksize for clients that send unaligned requests",
               static_cast<int>(operation.size()), operation.data(), c.block_size_bytes,
               static_cast<unsigned long long>(offset_bytes), static_cast<unsigned long long>(count));
  nbdkit_set_error(EINVAL);
  return -1;
}

bool aligned(const Connection& c, std::uint64_t offset_bytes, std::uint64_t count) noexcept {
  return offset_bytes % c.block_size_bytes == 0 && count % c.block_size_bytes == 0;
}

Connection& as_connection(void* handle) noexcept { return *static_cast<Connection*>(handle); }

int on_config(const char* key, const char* value) {
  const std::string_view k = key;
  if (k == "url") {
    config_.url_text = value;
  } else if (k == "chap-file" || k == "chap_file") {
    config_.chap_file = value;
  } else if (k == "initiator-name" || k == "initiator_name") {
    config_.session.initiator_name = value;
  } else {
    nbdkit_error("unknown parameter '%s' (known: url=, chap-file=, initiator-name=)", key);
    return -1;
  }
  return 0;
}

int on_config_complete() try {
  if (!config_.url_text) {
    nbdkit_error("url= is required: url=iscsi://HOST[:PORT]/TARGET-IQN/LUN");
    return -1;
  }
  auto url = initiator::parse_url(*config_.url_text);
  if (!url || url->target.empty()) {
    nbdkit_error("%s", initiator::diagnose_bad_url(*config_.url_text, /*with_lun=*/true).text().c_str());
    return -1;
  }
  if (!url->password.empty()) {
    nbdkit_debug("url: holds a CHAP secret, which other users can see in ps; use chap-file= or "
                 "LIBISCSI_CHAP_PASSWORD");
  }
  // CHAP without secrets on the command line: chap-file= (0600 enforced) and libiscsi's
  // environment variables, merged with the URL's user as the other front ends do
  // (chap_credentials.hpp). The variables are removed so nbdkit --run's command does not inherit them.
  initiator::ChapSources sources;
  if (config_.chap_file) {
    auto file = initiator::read_chap_file(*config_.chap_file);
    if (!file) {
      nbdkit_error("chap-file: %s", file.error().c_str());
      return -1;
    }
    sources.file = std::move(*file);
  }
  sources.environment = initiator::chap_from_environment();
  initiator::clear_chap_environment();
  auto chap = initiator::resolve_chap(*url, sources, config_.session.chap);
  if (!chap) {
    nbdkit_error("%s", chap.error().c_str());
    return -1;
  }
  config_.session.chap = std::move(*chap);
  config_.url = std::move(*url);
  return 0;
} catch (const std::exception& e) {
  nbdkit_error("config: %s", e.what());
  return -1;
}

void* on_open(int /*readonly*/) try {
  auto opened = initiator::BlockingClient::open(*config_.url, config_.session);
  if (!opened) {
    initiator::ErrorContext context{.program = initiator::Program::nbd, .url = config_.url,
                                    .chap = &config_.session.chap};
    if (initiator::needs_target_list(opened.error())) {
      auto found = initiator::BlockingClient::discover(*config_.url, config_.session);
      if (found) context.listed_targets = initiator::target_names(*found);
    }
    nbdkit_error("%s: url=%s", initiator::diagnose(opened.error(), context).text().c_str(),
                 initiator::format_url(*config_.url).c_str());
    nbdkit_set_error(errno_of(opened.error()));
    return nullptr;
  }
  auto connection = std::make_unique<Connection>();
  connection->client = std::move(*opened);
  const auto& capacity = connection->client->info().capacity;
  connection->block_size_bytes = capacity.block_size_bytes;
  connection->capacity_bytes = capacity.size_bytes();
  if (connection->block_size_bytes == 0) {
    nbdkit_error("open: the LUN reports a logical block length of 0: url=%s",
                 initiator::format_url(*config_.url).c_str());
    return nullptr;
  }
  return connection.release();
} catch (const std::exception& e) {
  nbdkit_error("open: %s", e.what());
  return nullptr;
}

void on_close(void* handle) {
  std::unique_ptr<Connection> connection(static_cast<Connection*>(handle));
  if (auto done = connection->client->logout(); !done) {
    nbdkit_debug("close: logout: %s", done.error().message().c_str());
  }
}

int64_t on_get_size(void* handle) { return static_cast<int64_t>(as_connection(handle).capacity_bytes); }

int on_block_size(void* handle, uint32_t* minimum, uint32_t* preferred, uint32_t* maximum) {
  const Connection& c = as_connection(handle);
  // nbdkit: minimum a power of 2 ≤ 64 KiB; preferred a power of 2 in [max(512, minimum), 32 MiB].
  *minimum = c.block_size_bytes;
  std::uint32_t p = c.block_size_bytes < 4096 ? 4096 : c.block_size_bytes;
  *preferred = p;
  *maximum = 0xffffffff;
  return 0;
}

int on_can_write(void* handle) {
  const auto& mode = as_connection(handle).client->info().mode_header;
  return mode && mode->write_protected ? 0 : 1;  // SBC-4 §6.5.1 WP
}

int on_can_flush(void*) { return 1; }  // SYNCHRONIZE CACHE

int on_can_fua(void* handle) {
  const auto& mode = as_connection(handle).client->info().mode_header;
  // DPOFUA: the unit honours FUA in WRITE; otherwise nbdkit follows the write with a flush.
  return mode && mode->dpofua ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_EMULATE;
}

int on_can_trim(void* handle) {
  const auto& provisioning = as_connection(handle).client->info().provisioning;
  return provisioning && provisioning->lbpu ? 1 : 0;  // VPD 0xb2 LBPU: UNMAP supported
}

// WRITE SAME (16) of zeroes; a unit without it answers ILLEGAL REQUEST, which zero() turns into
// EOPNOTSUPP so nbdkit falls back to writing zeroes with pwrite().
int on_can_zero(void*) { return 1; }

int on_pread(void* handle, void* buffer, uint32_t count, uint64_t offset, uint32_t /*flags*/) {
  Connection& c = as_connection(handle);
  // nbdkit has checked offset + count against get_size().
  auto done = c.client->read_bytes(offset, {static_cast<std::byte*>(buffer), count});
  return done ? 0 : fail("pread", done.error(), c, offset, count);
}

int on_pwrite(void* handle, const void* buffer, uint32_t count, uint64_t offset, uint32_t flags) {
  Connection& c = as_connection(handle);
  if (!aligned(c, offset, count)) return unaligned("pwrite", c, offset, count);
  const initiator::WriteOptions options{.lba = offset / c.block_size_bytes,
                                        .blocks = static_cast<std::uint32_t>(count / c.block_size_bytes),
                                        .fua = (flags & NBDKIT_FLAG_FUA) != 0};
  auto done = c.client->write(options, {static_cast<const std::byte*>(buffer), count});
  return done ? 0 : fail("pwrite", done.error(), c, offset, count);
}

int on_flush(void* handle, uint32_t /*flags*/) {
  Connection& c = as_connection(handle);
  auto done = c.client->synchronize_cache();
  return done ? 0 : fail("flush", done.error(), c, 0, c.capacity_bytes);
}

/// After a trim or zero with FUA (can_fua said NATIVE): SYNCHRONIZE CACHE of that range.
int flush_range(Connection& c, std::uint64_t lba, std::uint64_t blocks, uint32_t flags, std::uint64_t offset,
                std::uint64_t count) {
  if ((flags & NBDKIT_FLAG_FUA) == 0) return 0;
  const bool fits = blocks <= 0xffffffffU;
  auto done = c.client->synchronize_cache(
      fits ? initiator::FlushOptions{.lba = lba, .blocks = static_cast<std::uint32_t>(blocks)}
           : initiator::FlushOptions{});
  return done ? 0 : fail("flush", done.error(), c, offset, count);
}

int on_trim(void* handle, uint32_t count, uint64_t offset, uint32_t flags) {
  Connection& c = as_connection(handle);
  const std::uint64_t bs = c.block_size_bytes;
  const std::uint64_t first = (offset + bs - 1) / bs;  // rounded inward (see ALIGNMENT)
  const std::uint64_t end = (offset + count) / bs;
  if (end <= first) return 0;
  const initiator::BlockRange range{.lba = first, .blocks = end - first};
  auto done = c.client->unmap({&range, 1});
  if (!done) return fail("trim", done.error(), c, offset, count);
  return flush_range(c, range.lba, range.blocks, flags, offset, count);
}

int on_zero(void* handle, uint32_t count, uint64_t offset, uint32_t flags) {
  Connection& c = as_connection(handle);
  if (!aligned(c, offset, count)) return unaligned("zero", c, offset, count);
  const initiator::WriteZeroesOptions options{.lba = offset / c.block_size_bytes,
                                              .blocks = count / c.block_size_bytes,
                                              .may_unmap = (flags & NBDKIT_FLAG_MAY_TRIM) != 0};
  auto done = c.client->write_zeroes(options);
  if (!done) {
    const int value = errno_of(done.error());
    // SPC-5 ILLEGAL REQUEST / INVALID COMMAND OPERATION CODE or not supported: let nbdkit write
    // zeroes itself (nbdkit-plugin(3), .zero). With FAST_ZERO the client asked not to be slowed.
    if (value == EOPNOTSUPP || value == ENOTSUP || value == EINVAL) {
      nbdkit_debug("zero: WRITE SAME not usable here (%s); nbdkit falls back to writes",
                   done.error().message().c_str());
      nbdkit_set_error(EOPNOTSUPP);
      return -1;
    }
    return fail("zero", done.error(), c, offset, count);
  }
  return flush_range(c, options.lba, options.blocks, flags, offset, count);
}

void on_dump_plugin() {
  std::printf("iserkit_thread_model=parallel (one iSCSI session per connection)\n");
}

nbdkit_plugin make_plugin() {
  nbdkit_plugin p{};
  p.name = "iserkit";
  p.longname = "nbdkit iserkit plugin (iSCSI over the iserkit initiator)";
  p.version = "0.1";
  p.description = "Serves one iSCSI LUN through the iserkit initiator library";
  p.config = on_config;
  p.config_complete = on_config_complete;
  p.config_help =
      "url=iscsi://[USER@]HOST[:PORT]/TARGET-IQN/LUN  (required) the LUN to serve (iser:// for RDMA)\n"
      "chap-file=FILE                                 CHAP user/secret file (mode 0600; keys username, secret,\n"
      "                                               target_username, target_secret); or LIBISCSI_CHAP_* variables\n"
      "initiator-name=IQN                             the initiator's iSCSI name";
  p.magic_config_key = "url";
  p.open = on_open;
  p.close = on_close;
  p.get_size = on_get_size;
  p.block_size = on_block_size;
  p.can_write = on_can_write;
  p.can_flush = on_can_flush;
  p.can_fua = on_can_fua;
  p.can_trim = on_can_trim;
  p.can_zero = on_can_zero;
  p.pread = on_pread;
  p.pwrite = on_pwrite;
  p.flush = on_flush;
  p.trim = on_trim;
  p.zero = on_zero;
  p.dump_plugin = on_dump_plugin;
  p.errno_is_preserved = 0;
  return p;
}

nbdkit_plugin plugin = make_plugin();

}  // namespace

NBDKIT_REGISTER_PLUGIN(plugin)
