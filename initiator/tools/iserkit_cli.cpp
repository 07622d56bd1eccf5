// The `iserkit` command line tool: discover, inquiry, readcap, luns, read, write, copy over the
// initiator's public API (BlockingClient). Layer 6: exceptions (cxxopts) and blocking calls are
// allowed here. Errors: "<operation>: <what happened>: <next step>: key=value" on stderr, worded by
// initiator/diagnosis.hpp (shared with iserkit-nbd and iserkit-fuse), and its exit status: 0 success,
// 1 other failure, 2 usage, 3 gave up, 4 portal unreachable, 5 login refused, 6 the LUN refused.
// --json: one JSON document on stdout per run (cli_json.hpp; on error {"error": {...}} as well).
// Unaligned --offset/--length are handled by read-modify-write of the edge blocks (write) or
// partial copies (read); see LunHandle::write_bytes for the concurrency caveat.
// CHAP credentials: the URL > --chap-user/--secret-file/--target-user/--target-secret-file >
// --chap-file (mode 0600) > libiscsi's LIBISCSI_CHAP_* variables (chap_credentials.hpp).
// `write` checks that a regular input file fits before writing anything; SIGINT/SIGTERM stop it
// after the command in flight, flush, and print what was written (exit status 128 + signal).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/status_socket.hpp"
#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/client.hpp"
#include "iserkit/initiator/copy.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/option_values.hpp"
#include "iserkit/initiator/session.hpp"
#include "cli_json.hpp"
#include "copy_command.hpp"
#include "progress.hpp"

namespace ik = iserkit::initiator;

namespace {

using iserkit::cli::Json;

constexpr std::size_t chunk_bytes = 4u << 20;

// --json: results and errors go to stdout as one JSON document.
bool json_output = false;

// Prints one JSON document (peer strings that are not UTF-8 are replaced, never a throw).
void print_json(const Json& doc) {
  std::cout << doc.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

using ik::ExitStatus;

// Prints "<operation>: <what>: <next step>: key=value" (and the JSON error with --json); returns
// the exit status.
int error(const std::string& operation, const ik::Diagnosis& d, const std::string& kv = {}) {
  std::cerr << operation << ": " << d.text() << (kv.empty() ? "" : ": " + kv) << "\n";
  if (json_output)
    print_json({{"error", {{"operation", operation}, {"message", d.what}, {"next_step", d.next_step}, {"detail", kv},
                           {"exit_status", ik::exit_code(d.exit_status)}}}});
  return ik::exit_code(d.exit_status);
}

int error(const std::string& operation, const std::string& what, const std::string& kv = {},
          ExitStatus status = ExitStatus::failure) {
  return error(operation, ik::Diagnosis{.what = what, .next_step = {}, .exit_status = status}, kv);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// The URL as typed, with any password replaced by "***" (secrets are never printed).
std::string redact(const std::string& text) {
  const auto scheme = text.find("://");
  const auto at = text.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos) return text;
  const auto pct = text.find('%', scheme + 3);
  if (pct == std::string::npos || pct > at) return text;
  return text.substr(0, pct + 1) + "***" + text.substr(at);
}

// The first line of `path` (a secret file; --chap-file is the checked, documented way).
std::string read_secret(const std::string& path) {
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) != 0)
    std::cerr << "iserkit: warning: " << path << " can be read by group or others (chmod 600 " << path << ")\n";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read secret file " + path);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) throw std::runtime_error("secret file " + path + " is empty");
  return line;
}

struct Common {
  ik::SessionOptions options;
  bool progress = false;  ///< show read/write progress on stderr (progress.hpp)
};

// What the error concerned, for diagnose(): the URL (portal, target, LUN) and the credentials.
ik::ErrorContext context(const Common& c, const ik::Url& url) {
  return {.program = ik::Program::cli, .url = url, .chap = &c.options.chap};
}

// Words for `ec` from a login, discovery or command on `url`; after an unknown target, what
// discovery lists at the portal.
ik::Diagnosis diagnose(const Common& c, const ik::Url& url, std::error_code ec, ik::ErrorContext ctx) {
  if (ik::needs_target_list(ec)) {
    if (auto found = ik::BlockingClient::discover(url, c.options)) ctx.listed_targets = ik::target_names(*found);
  }
  return ik::diagnose(ec, ctx);
}

ik::Diagnosis diagnose(const Common& c, const ik::Url& url, std::error_code ec) {
  return diagnose(c, url, ec, context(c, url));
}

iserkit::Result<ik::Url> url_for(const std::string& op, const std::string& text, bool need_target, int& rc) {
  auto url = ik::parse_url(text);
  if (!url || (need_target && url->target.empty())) {
    rc = error(op, ik::diagnose_bad_url(text, need_target), "url=" + redact(text));
    return iserkit::fail(iserkit::errc::invalid_argument);
  }
  return url;
}

int cmd_discover(const Common& c, const std::string& text) {
  int rc = 0;
  auto url = url_for("discover", text, false, rc);
  if (!url) return rc;
  auto targets = ik::BlockingClient::discover(*url, c.options);
  if (!targets)
    return error("discover", diagnose(c, *url, targets.error()), "portal=" + url->host + ":" + std::to_string(url->port));
  if (json_output) {
    print_json(iserkit::cli::discovery_json(iserkit::cli::portal_text(url->host, url->port), *targets));
    return 0;
  }
  for (const auto& t : *targets) {
    std::cout << t.name << "\n";
    for (const auto& p : t.portals) {
      const bool v6 = p.host.find(':') != std::string::npos;
      std::cout << "  portal " << (v6 ? "[" + p.host + "]" : p.host) << ":" << p.port << " tpgt=" << p.portal_group_tag
                << "\n";
    }
  }
  return 0;
}

// Logs in to the LUN of URL `text` (parsed into `parsed`); on failure prints why and sets `rc`.
iserkit::Result<std::unique_ptr<ik::BlockingClient>> open_client(const std::string& op, const Common& c,
                                                                 const std::string& text, int& rc, ik::Url& parsed) {
  auto url = url_for(op, text, true, rc);
  if (!url) return iserkit::fail(url.error());
  parsed = *url;
  auto client = ik::BlockingClient::open(*url, c.options);
  if (!client) rc = error(op, diagnose(c, *url, client.error()), "url=" + ik::format_url(*url));
  return client;
}

int cmd_inquiry(const Common& c, const std::string& text) {
  int rc = 0;
  ik::Url url;
  auto client = open_client("inquiry", c, text, rc, url);
  if (!client) return rc;
  auto& cl = **client;
  auto inq = cl.inquiry();
  if (!inq) return error("inquiry", diagnose(c, url, inq.error()));
  if (json_output) {
    std::optional<std::string> serial;
    if (auto sn = cl.unit_serial_number()) {
      const auto first = sn->find_first_not_of(' ');
      serial = first == std::string::npos ? std::string() : sn->substr(first);
    }
    std::optional<std::vector<iserkit::scsi::Designator>> ids;
    if (auto d = cl.device_identification()) ids = std::move(*d);
    print_json(iserkit::cli::inquiry_json(*inq, serial, ids, cl.info()));
    return 0;
  }
  std::cout << "vendor: " << inq->vendor << "\nproduct: " << inq->product << "\nrevision: " << inq->revision << "\n";
  std::cout << "peripheral type: " << static_cast<unsigned>(inq->type) << "\n";
  if (auto sn = cl.unit_serial_number()) {
    const auto first = sn->find_first_not_of(' ');
    std::cout << "serial: " << (first == std::string::npos ? std::string() : sn->substr(first)) << "\n";
  }
  if (auto ids = cl.device_identification()) {
    for (const auto& d : *ids) {
      std::cout << "designator: " << iserkit::scsi::designator_text(d) << "\n";
    }
  }
  const auto& info = cl.info();
  if (info.block_limits) {
    const auto& b = *info.block_limits;
    std::cout << "block limits: max_transfer_length=" << b.maximum_transfer_length
              << " optimal_transfer_length=" << b.optimal_transfer_length
              << " max_unmap_lba_count=" << b.maximum_unmap_lba_count
              << " max_unmap_descriptors=" << b.maximum_unmap_block_descriptor_count
              << " max_write_same_length=" << b.maximum_write_same_length << "\n";
  } else {
    std::cout << "block limits: not reported\n";
  }
  // The per-command cap the initiator derived (Block Limits VPD, the transport's caps): larger reads
  // and writes are split into commands of at most this many bytes.
  std::cout << "max transfer per command: " << std::uint64_t{info.max_transfer_blocks} * info.capacity.block_size_bytes
            << " bytes\n";
  if (info.mode_header)
    std::cout << "mode header: dpofua=" << info.mode_header->dpofua << " write_protected=" << info.mode_header->write_protected
              << "\n";
  else
    std::cout << "mode header: not reported\n";
  if (info.provisioning)
    std::cout << "provisioning: unmap=" << info.provisioning->lbpu << " write_same_unmap=" << info.provisioning->lbpws
              << "\n";
  return 0;
}

int cmd_readcap(const Common& c, const std::string& text) {
  int rc = 0;
  ik::Url url;
  auto client = open_client("readcap", c, text, rc, url);
  if (!client) return rc;
  auto cap = (*client)->read_capacity();
  if (!cap) return error("readcap", diagnose(c, url, cap.error()));
  if (json_output) {
    print_json(iserkit::cli::capacity_json(*cap));
    return 0;
  }
  std::cout << "blocks: " << cap->blocks << "\nblock size: " << cap->block_size_bytes << "\nbytes: " << cap->size_bytes()
            << "\nthin: " << (cap->thin ? "yes" : "no") << "\n";
  return 0;
}

// One REPORT LUNS entry and, for a LUN LunHandle can open (a block device), its capacity.
struct LunEntry {
  iserkit::scsi::Lun lun;
  std::optional<ik::Capacity> capacity;
};

// Logs in to url.target, runs REPORT LUNS (SPC-5 §6.33) on LUN 0's addressing (which need not be a
// block device: tgtd's LUN 0 is its controller) and opens each LUN to read its capacity.
iserkit::Awaitable<iserkit::Result<std::vector<LunEntry>>> list_luns(iserkit::asio::any_io_executor ex, ik::Url url,
                                                                 ik::SessionOptions options) {
  auto session = co_await ik::Session::connect(ex, url, std::move(options));
  if (!session) co_return iserkit::fail(session.error());
  auto luns = co_await ik::report_luns(**session);
  std::vector<LunEntry> entries;
  if (luns) {
    for (const auto& l : *luns) {
      LunEntry e{.lun = l, .capacity = std::nullopt};
      if (auto h = co_await ik::LunHandle::open(*session, l)) e.capacity = h->info().capacity;
      entries.push_back(e);
    }
  }
  (void)co_await (*session)->logout();
  (*session)->close();
  if (!luns) co_return iserkit::fail(luns.error());
  co_return entries;
}

int cmd_luns(const Common& c, const std::string& text) {
  int rc = 0;
  auto url = url_for("luns", text, true, rc);
  if (!url) return rc;
  iserkit::asio::io_context io;
  std::optional<iserkit::Result<std::vector<LunEntry>>> result;
  iserkit::asio::co_spawn(io, list_luns(io.get_executor(), *url, c.options),
                          [&](std::exception_ptr e, iserkit::Result<std::vector<LunEntry>> r) {
                            if (e) std::rethrow_exception(e);
                            result = std::move(r);
                          });
  io.run();
  if (!result || !*result)
    return error("luns", diagnose(c, *url, result ? result->error() : make_error_code(std::errc::io_error)),
                 "url=" + ik::format_url(*url));
  if (json_output) {
    Json list = Json::array();
    for (const auto& e : **result) {
      Json j = iserkit::cli::lun_json(e.lun);
      j["capacity"] = e.capacity ? iserkit::cli::capacity_json(*e.capacity) : Json(nullptr);
      list.push_back(std::move(j));
    }
    print_json({{"target", url->target}, {"luns", std::move(list)}});
    return 0;
  }
  for (const auto& e : **result) {
    const auto index = e.lun.index();
    std::cout << "lun " << (index ? std::to_string(*index) : std::string("-"))
              << " address=" << iserkit::cli::lun_json(e.lun)["address"].get<std::string>();
    if (e.capacity) std::cout << " bytes=" << e.capacity->size_bytes() << " block_size=" << e.capacity->block_size_bytes;
    std::cout << "\n";
  }
  return 0;
}

// Prints `doc` as "key.sub[0].leaf: value" lines.
void print_flat(const Json& doc, const std::string& prefix) {
  if (doc.is_object()) {
    for (const auto& [k, v] : doc.items()) print_flat(v, prefix.empty() ? k : prefix + "." + k);
  } else if (doc.is_array()) {
    for (std::size_t i = 0; i < doc.size(); ++i) print_flat(doc[i], prefix + "[" + std::to_string(i) + "]");
  } else {
    std::cout << prefix << ": " << (doc.is_string() ? doc.get<std::string>() : doc.dump()) << "\n";
  }
}

// `iserkit status PATH`: the document a daemon's --status-socket answers.
int cmd_status(const std::string& path) {
  auto text = iserkit::query_status_socket(path);
  if (!text) return error("status", "cannot query the status socket: " + text.error().message(), "path=" + path);
  Json doc = Json::parse(*text, nullptr, false);
  if (doc.is_discarded()) return error("status", "the status socket answered something that is not JSON", "path=" + path);
  if (json_output) {
    print_json(doc);
  } else {
    print_flat(doc, "");
  }
  return 0;
}

/// The per-command cap in bytes (LunInfo::max_transfer_blocks × the logical block size).
std::uint64_t max_transfer_bytes(const ik::LunInfo& info) {
  return std::uint64_t{info.max_transfer_blocks} * info.capacity.block_size_bytes;
}

int cmd_read(const Common& c, const std::string& text, std::uint64_t offset, std::optional<std::uint64_t> length,
             const std::string& out_path) {
  int rc = 0;
  ik::Url url;
  auto client = open_client("read", c, text, rc, url);
  if (!client) return rc;
  auto& cl = **client;
  const std::uint64_t size = cl.info().capacity.size_bytes();
  auto ctx = context(c, url);
  ctx.capacity_bytes = size;
  ctx.offset_bytes = offset;
  ctx.length_bytes = length.value_or(offset <= size ? size - offset : 0);
  if (offset > size || *ctx.length_bytes > size - offset)
    return error("read", ik::diagnose_past_end("read", ctx),
                 "offset=" + std::to_string(offset) + " length=" + std::to_string(*ctx.length_bytes) +
                     " size=" + std::to_string(size));
  const std::uint64_t len = *ctx.length_bytes;
  int fd = STDOUT_FILENO;
  if (json_output && (out_path.empty() || out_path == "-"))
    return error("read", "--json needs -o FILE (stdout carries the JSON summary)", {}, ExitStatus::usage);
  const auto start = std::chrono::steady_clock::now();
  if (!out_path.empty() && out_path != "-") {
    fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return error("read", "cannot open output", "file=" + out_path + " errno=" + std::strerror(errno));
  }
  // From the session's pool: registered memory on iSER, so the target RDMA-writes straight into it.
  auto buffer = cl.session().buffer_pool().allocate(chunk_bytes);
  iserkit::cli::Progress progress("read", len, c.progress);
  for (std::uint64_t done = 0; done < len;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, len - done));
    auto r = cl.read_bytes(offset + done, buffer.bytes().first(n));
    if (!r) progress.abandon();
    if (!r) {
      ctx.offset_bytes = offset + done;
      ctx.length_bytes = n;
      return error("read", diagnose(c, url, r.error(), ctx),
                   "offset=" + std::to_string(offset + done) + " length=" + std::to_string(n));
    }
    if (!write_all(fd, buffer.data(), n)) {
      progress.abandon();
      return error("read", "cannot write output", std::string("errno=") + std::strerror(errno));
    }
    done += n;
    progress.update(done);
  }
  if (fd != STDOUT_FILENO) ::close(fd);
  progress.finish();
  if (json_output)
    print_json({{"operation", "read"}, {"offset_bytes", offset}, {"length_bytes", len}, {"output", out_path},
                {"max_transfer_bytes", max_transfer_bytes(cl.info())}, {"seconds", seconds_since(start)},
                {"copied_payload_bytes", iserkit::copied_payload_bytes()}});
  return 0;
}

// SIGINT and SIGTERM during `write`: blocked in every thread (from before the client's I/O thread
// exists, so it inherits the mask) and read from a signalfd while waiting for input and between
// commands, so the write stops at a command boundary. After the first one the main thread
// unblocks them: a second signal ends the process at once (a flush that hangs can still be left).
// A signal the parent left ignored (a background job of a non-interactive shell, nohup) stays so.
// While the login runs, a signal waits (connect and login have their own timeouts).
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int signal : {SIGINT, SIGTERM}) {
      struct sigaction current{};
      if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&set_, signal);
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~StopSignals() {
    if (fd_ >= 0) ::close(fd_);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The stop signal received (SIGINT or SIGTERM), 0 while none has; never blocks.
  int received() {
    if (signal_ != 0 || fd_ < 0) return signal_;
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      signal_ = static_cast<int>(info.ssi_signo);
      ::pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);  // a second signal: default action
    }
    return signal_;
  }

 private:
  sigset_t set_{};
  int fd_ = -1;
  int signal_ = 0;
};

// Reads up to n bytes: less at end of input or once a stop signal arrived (what was read by then
// is kept, so it is written as the last command).
std::size_t read_input(int fd, std::byte* p, std::size_t n, StopSignals& stop, bool& failed) {
  std::size_t got = 0;
  while (got < n && stop.received() == 0) {
    pollfd fds[2] = {{.fd = fd, .events = POLLIN, .revents = 0}, {.fd = stop.fd(), .events = POLLIN, .revents = 0}};
    if (::poll(fds, stop.fd() >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      failed = true;
      break;
    }
    if (fds[0].revents == 0) continue;  // the signal: the loop condition reads it
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      failed = true;
      break;
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::string signal_name(int signal) { return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : std::to_string(signal); }

// "bytes=N offset=O last_offset=L": what a write put on the LUN (L = its last byte; "-" for none),
// each key preceded by `prefix`.
std::string written_text(std::uint64_t offset, std::uint64_t end, const std::string& prefix = {}) {
  return prefix + "bytes=" + std::to_string(end - offset) + " " + prefix + "offset=" + std::to_string(offset) + " " +
         prefix + "last_offset=" + (end > offset ? std::to_string(end - 1) : std::string("-"));
}

int cmd_write(const Common& c, const std::string& text, std::uint64_t offset, const std::string& in_path, bool fua) {
  int fd = STDIN_FILENO;
  if (!in_path.empty() && in_path != "-") {
    fd = ::open(in_path.c_str(), O_RDONLY);
    if (fd < 0) return error("write", "cannot open input", "file=" + in_path + " errno=" + std::strerror(errno));
  }
  // The input's size when it is a regular file: checked against the LUN before anything is written.
  std::optional<std::uint64_t> input_bytes;
  if (struct stat st{}; ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const auto here = ::lseek(fd, 0, SEEK_CUR);
    input_bytes = here >= 0 && st.st_size > here ? static_cast<std::uint64_t>(st.st_size - here) : 0;
  }
  StopSignals stop;  // before the client's thread starts
  int rc = 0;
  ik::Url url;
  auto client = open_client("write", c, text, rc, url);
  if (!client) return rc;
  auto& cl = **client;
  if (const int sig = stop.received(); sig != 0) {
    error("write", "interrupted by " + signal_name(sig) + " before anything was written", written_text(offset, offset));
    return 128 + sig;
  }
  const std::uint64_t size = cl.info().capacity.size_bytes();
  auto ctx = context(c, url);
  ctx.capacity_bytes = size;
  ctx.offset_bytes = offset;
  // Refused before anything is written: an offset past the end, or a regular file that does not fit.
  const auto past_end = [&](std::uint64_t length) {
    ctx.length_bytes = length;
    auto d = ik::diagnose_past_end("write", ctx);
    d.what += " (nothing written)";
    return d;
  };
  if (offset > size)
    return error("write", past_end(input_bytes.value_or(0)), "offset=" + std::to_string(offset) + " size=" + std::to_string(size));
  if (input_bytes && *input_bytes > size - offset)
    return error("write", past_end(*input_bytes),
                 "input_bytes=" + std::to_string(*input_bytes) + " offset=" + std::to_string(offset) +
                     " size=" + std::to_string(size) + " room=" + std::to_string(size - offset));
  const auto start = std::chrono::steady_clock::now();
  // From the session's pool: registered memory on iSER, so the target RDMA-reads straight from it.
  auto buffer = cl.session().buffer_pool().allocate(chunk_bytes);
  std::uint64_t pos = offset;
  iserkit::cli::Progress progress("write", input_bytes.value_or(0), c.progress);
  // Data already written is flushed before an error is reported (unless the writes were FUA).
  const auto flush_then_fail = [&](ik::Diagnosis d, const std::string& kv) {
    progress.abandon();
    std::string state = fua ? "written with FUA" : "flushed";
    if (!fua && pos > offset) {
      if (auto r = cl.synchronize_cache(); !r)
        state = "NOT flushed: SYNCHRONIZE CACHE failed: " + ik::diagnose(r.error(), ctx).what;
    }
    d.what += " (" + (pos > offset ? "what was written before is " + state : std::string("nothing written")) + ")";
    return error("write", d, kv + (kv.empty() ? "" : " ") + written_text(offset, pos, "written_"));
  };
  while (stop.received() == 0) {
    bool failed = false;
    const std::size_t n = read_input(fd, buffer.data(), chunk_bytes, stop, failed);
    if (failed)
      return flush_then_fail({.what = "cannot read input", .next_step = {}, .exit_status = ExitStatus::failure},
                             std::string("errno=") + std::strerror(errno));
    if (n == 0) break;
    // A pipe's size is unknown: data past the end is noticed here, before it is sent.
    ctx.offset_bytes = pos;
    ctx.length_bytes = n;
    if (n > size - pos)
      return flush_then_fail(ik::diagnose_past_end("write", ctx),
                             "offset=" + std::to_string(pos) + " length=" + std::to_string(n) + " size=" + std::to_string(size));
    auto r = cl.write_bytes(pos, buffer.bytes().first(n), {.fua = fua});
    if (!r) return flush_then_fail(diagnose(c, url, r.error(), ctx), "offset=" + std::to_string(pos) + " length=" + std::to_string(n));
    pos += n;
    progress.update(pos - offset);
    if (n < chunk_bytes && stop.received() == 0) break;  // end of input
  }
  if (fd != STDIN_FILENO) ::close(fd);
  if (!fua) {
    if (auto r = cl.synchronize_cache(); !r) {
      progress.abandon();
      auto d = ik::diagnose(r.error(), ctx);
      d.what = "SYNCHRONIZE CACHE failed: " + d.what;
      return error("write", d, written_text(offset, pos));
    }
  }
  if (const int sig = stop.received(); sig != 0) {
    // Stopped at a command boundary: what was written is on the LUN (flushed, or FUA writes).
    progress.abandon();
    std::cerr << "write: interrupted by " << signal_name(sig) << ": stopped after a whole command, "
              << (fua ? "every write was FUA" : "flushed") << ": " << written_text(offset, pos) << "\n";
    if (json_output)
      print_json({{"operation", "write"}, {"interrupted", signal_name(sig)}, {"offset_bytes", offset},
                  {"length_bytes", pos - offset}, {"last_offset", pos > offset ? Json(pos - 1) : Json(nullptr)},
                  {"fua", fua}, {"synchronized", !fua}, {"seconds", seconds_since(start)}});
    return 128 + sig;
  }
  progress.finish();
  if (json_output)
    print_json({{"operation", "write"}, {"offset_bytes", offset}, {"length_bytes", pos - offset},
                {"input", in_path.empty() ? std::string("-") : in_path}, {"fua", fua}, {"synchronized", !fua},
                {"max_transfer_bytes", max_transfer_bytes(cl.info())}, {"seconds", seconds_since(start)},
                {"copied_payload_bytes", iserkit::copied_payload_bytes()}});
  return 0;
}

const char* copy_stage_name(iserkit::cli::CopyStage stage) {
  using iserkit::cli::CopyStage;
  switch (stage) {
    case CopyStage::login_source: return "login-source";
    case CopyStage::open_source: return "open-source";
    case CopyStage::login_destination: return "login-destination";
    case CopyStage::open_destination: return "open-destination";
    case CopyStage::source_range: return "source-range";
    case CopyStage::destination_range: return "destination-range";
    case CopyStage::unusable_xcopy: return "xcopy-unusable";
    case CopyStage::copy: return "copy";
    case CopyStage::flush: return "flush";
    case CopyStage::done: return "done";
  }
  return "unknown";
}

// `iserkit copy SRC DST`: copy_command.hpp does the copy; this reports it. Exit status as every
// command (0 copied, 2 usage, 3 gave up, 4 unreachable, 5 login, 6 the LUN refused, 1 other); a
// failure after the copy started names the offsets reached (every byte before them is copied).
int cmd_copy(const Common& c, const std::string& source_text, const std::string& destination_text,
             iserkit::cli::CopyArguments args) {
  using iserkit::cli::CopyStage;
  int rc = 0;
  auto source = url_for("copy", source_text, true, rc);
  if (!source) return rc;
  auto destination = url_for("copy", destination_text, true, rc);
  if (!destination) return rc;
  args.source = *source;
  args.destination = *destination;
  const auto start = std::chrono::steady_clock::now();
  iserkit::asio::io_context io;
  std::optional<iserkit::cli::CopyOutcome> outcome;
  iserkit::cli::Progress progress("copy", 0, c.progress);
  auto on_progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.set_total(total);
    progress.update(done);
  };
  iserkit::asio::co_spawn(io, iserkit::cli::run_copy(io.get_executor(), args, c.options, on_progress),
                          [&](std::exception_ptr e, iserkit::cli::CopyOutcome r) {
                            if (e) std::rethrow_exception(e);
                            outcome = std::move(r);
                          });
  io.run();
  if (!outcome) return error("copy", "the copy did not finish", {});
  const auto& o = *outcome;
  const double seconds = seconds_since(start);
  // EXTENDED COPY and READ go to the source's LU; WRITE and SYNCHRONIZE CACHE to the destination's.
  const bool at_source = o.stage == CopyStage::login_source || o.stage == CopyStage::open_source ||
                         o.stage == CopyStage::source_range ||
                         (o.stage == CopyStage::copy && o.failed_command != "WRITE");
  const ik::Url& url = at_source ? *source : *destination;
  // What moved, for the summary and for a failure: the method, the fallback and the offsets.
  const std::uint64_t src_reached = args.source_offset_bytes + o.copied_bytes;
  const std::uint64_t dst_reached = args.destination_offset_bytes + o.copied_bytes;
  Json summary = {{"operation", "copy"},
                  {"method", o.method.empty() ? Json(nullptr) : Json(o.method)},
                  {"fallback_reason", o.fallback_reason.empty() ? Json(nullptr) : Json(o.fallback_reason)},
                  {"source", ik::format_url(*source)},
                  {"destination", ik::format_url(*destination)},
                  {"source_offset_bytes", args.source_offset_bytes},
                  {"destination_offset_bytes", args.destination_offset_bytes},
                  {"length_bytes", o.length_bytes},
                  {"bytes", o.copied_bytes},
                  {"commands", o.commands},
                  {"xcopy_command_max_bytes", o.xcopy_command_max_bytes},
                  {"one_session", o.one_session},
                  {"network_payload_bytes", o.network_payload_bytes},
                  {"seconds", seconds},
                  {"copied_payload_bytes", iserkit::copied_payload_bytes()}};
  const std::string reached = "method=" + (o.method.empty() ? std::string("none") : o.method) +
                              " copied_bytes=" + std::to_string(o.copied_bytes) +
                              " source_offset_reached=" + std::to_string(src_reached) +
                              " destination_offset_reached=" + std::to_string(dst_reached);
  // The method is always said (stderr), so a script sees when the offload did not happen.
  const auto say_method = [&] {
    if (o.method == "xcopy")
      std::cerr << "copy: EXTENDED COPY: the target copies, the data does not cross the network\n";
    else if (o.method == "read-write")
      std::cerr << "copy: READ + WRITE through this host (EXTENDED COPY not used: " << o.fallback_reason << ")\n";
  };
  if (o.stage != CopyStage::done) {
    progress.abandon();
    say_method();
    ik::Diagnosis d;
    auto ctx = context(c, url);
    std::string kv;
    switch (o.stage) {
      case CopyStage::source_range:
      case CopyStage::destination_range: {
        const bool src = o.stage == CopyStage::source_range;
        ctx.capacity_bytes = src ? o.source_capacity_bytes : o.destination_capacity_bytes;
        ctx.offset_bytes = src ? args.source_offset_bytes : args.destination_offset_bytes;
        ctx.length_bytes = o.length_bytes;
        d = ik::diagnose_past_end(src ? "copy from the source" : "copy to the destination", ctx);
        d.what += " (nothing copied)";
        kv = std::string(src ? "source" : "destination") + "_offset=" + std::to_string(*ctx.offset_bytes) +
             " length=" + std::to_string(o.length_bytes) + " size=" + std::to_string(*ctx.capacity_bytes);
        break;
      }
      case CopyStage::unusable_xcopy:
        d = {.what = "EXTENDED COPY cannot be used: " + o.fallback_reason + " (nothing copied)",
             .next_step = "copy without --method xcopy to let READ + WRITE do it",
             .exit_status = ExitStatus::failure};
        kv = "method=none";
        break;
      case CopyStage::copy:
      case CopyStage::flush:
        ctx.offset_bytes = src_reached;
        d = diagnose(c, url, o.error, ctx);
        d.what = o.failed_command + " failed: " + d.what;
        if (o.stage == CopyStage::flush)
          d.what += " (everything was copied but the destination's cache was not flushed)";
        else if (o.copied_bytes == 0)
          d.what += " (nothing copied)";
        else
          d.what += " (the copy stopped: every byte before the offsets reached is copied)";
        if (o.failed_command == "EXTENDED COPY" && ik::extended_copy_refused(o.error) && d.next_step.empty())
          d.next_step = "the target does not copy between these LUNs: copy without --method xcopy (READ + WRITE)";
        kv = reached;
        break;
      default:
        d = diagnose(c, url, o.error);
        kv = "stage=" + std::string(copy_stage_name(o.stage)) + " url=" + ik::format_url(url);
        break;
    }
    std::cerr << "copy: " << d.text() << (kv.empty() ? "" : ": " + kv) << "\n";
    if (json_output) {
      summary["stage"] = copy_stage_name(o.stage);
      summary["source_offset_reached"] = src_reached;
      summary["destination_offset_reached"] = dst_reached;
      print_json({{"error", {{"operation", "copy"}, {"message", d.what}, {"next_step", d.next_step}, {"detail", kv},
                             {"exit_status", ik::exit_code(d.exit_status)}}},
                  {"copy", std::move(summary)}});
    }
    return ik::exit_code(d.exit_status);
  }
  progress.finish();
  say_method();
  if (json_output) print_json(summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("iserkit", "iSCSI initiator tool\n\n"
                        "  iserkit discover iscsi://HOST[:PORT]\n"
                        "  iserkit inquiry  iscsi://HOST[:PORT]/TARGET/LUN\n"
                        "  iserkit readcap  URL\n"
                        "  iserkit luns     iscsi://HOST[:PORT]/TARGET   (REPORT LUNS)\n"
                        "  iserkit status   PATH   (a daemon's --status-socket)\n"
                        "  iserkit read     URL [--offset BYTES] [--length BYTES] [-o FILE]\n"
                        "  iserkit write    URL [--offset BYTES] [-i FILE] [--fua]\n"
                        "  iserkit copy     SRC-URL DST-URL [--offset BYTES] [--length BYTES] [--dst-offset BYTES]\n"
                        "                   [--method auto|xcopy|read-write]   (EXTENDED COPY when the target can)\n\n"
                        "--json prints one JSON document on stdout (field names: initiator/README.md).\n"
                        "Offsets and lengths are in bytes and may be unaligned (edge blocks are read-modify-written).\n"
                        "CHAP without secrets on the command line: --chap-file FILE (mode 0600; lines `username = ...`,\n"
                        "`secret = ...`, and for mutual CHAP `target_username = ...`, `target_secret = ...`) or libiscsi's\n"
                        "LIBISCSI_CHAP_USERNAME, LIBISCSI_CHAP_PASSWORD, LIBISCSI_CHAP_TARGET_USERNAME and\n"
                        "LIBISCSI_CHAP_TARGET_PASSWORD. Precedence: the URL (iscsi://USER[%SECRET]@...) > --chap-user,\n"
                        "--secret-file, --target-user, --target-secret-file > --chap-file > the environment.\n"
                        "write: SIGINT/SIGTERM stop after the command in flight; the data is flushed, the bytes written\n"
                        "and the last offset printed, and the exit status is 128 + the signal number.");
  opts.add_options()
    ("h,help", "show help")
    ("version", "print the version")
    ("json", "print the result (or the error) as one JSON document on stdout")
    ("progress", "read/write progress and a closing summary on stderr: auto (when stderr is a terminal), always, never",
     cxxopts::value<std::string>()->default_value("auto"))
    ("initiator-name", "InitiatorName (default iqn.2026-11.org.iserkit:initiator-<hostname>)", cxxopts::value<std::string>())
    ("log-level", "trace, debug, info, warn, error, off (any case)", cxxopts::value<std::string>()->default_value("warn"))
    ("header-digest", "none or crc32c (any case)", cxxopts::value<std::string>()->default_value("none"))
    ("data-digest", "none or crc32c (any case)", cxxopts::value<std::string>()->default_value("none"))
    ("command-timeout", "per-command timeout: seconds, or 500ms, 1.5s, 2m (0 = none)", cxxopts::value<std::string>())
    ("timeout", "deprecated: --command-timeout; a bare number here is still milliseconds (write 500ms or 5s)",
     cxxopts::value<std::string>())
    ("offset", "byte offset (read/write; copy: in the source): bytes, or 4K, 1M, 2G", cxxopts::value<std::string>()->default_value("0"))
    ("dst-offset", "copy: byte offset in the destination: bytes, or 4K, 1M, 2G", cxxopts::value<std::string>()->default_value("0"))
    ("method", "copy: auto (EXTENDED COPY when the target offers it for both LUNs, else READ + WRITE), xcopy "
               "(fail rather than READ + WRITE), read-write", cxxopts::value<std::string>()->default_value("auto"))
    ("length", "bytes to read or copy (default: to the end): bytes, or 4K, 1M, 2G", cxxopts::value<std::string>())
    ("o,output", "output file for read (default stdout)", cxxopts::value<std::string>()->default_value("-"))
    ("i,input", "input file for write (default stdin)", cxxopts::value<std::string>()->default_value("-"))
    ("fua", "write with FUA (otherwise SYNCHRONIZE CACHE at the end)")
    ("chap-file", "CHAP credentials file (mode 0600, refused if group/other may access it): username, secret, "
                  "target_username, target_secret", cxxopts::value<std::string>())
    ("chap-user", "CHAP user name (CHAP_N) when the URL has none", cxxopts::value<std::string>())
    ("secret-file", "file whose first line is our CHAP secret", cxxopts::value<std::string>())
    ("target-user", "mutual CHAP: the name the target must answer with (default: any)", cxxopts::value<std::string>())
    ("target-secret-file", "mutual CHAP: file whose first line is the target's secret", cxxopts::value<std::string>())
    ("chap-algorithms", "CHAP_A offered, in order: e.g. SHA-256,SHA3-256,SHA-1,MD5 (MD5 is always offered)",
     cxxopts::value<std::string>())
    ("nop-interval", "NOP-Out ping after this much silence from the target (0 = never): write a unit, 5s or "
                     "500ms; a bare number is still milliseconds here (deprecated; seconds in iserkit-nbd/-fuse)",
     cxxopts::value<std::string>()->default_value("0"))
    ("nop-timeout", "how long a ping may stay unanswered before the connection is declared dead: write a unit, "
                    "10s; a bare number is still milliseconds here (deprecated)",
     cxxopts::value<std::string>()->default_value("10s"))
    ("replacement-timeout", "how long to wait for a new connection after losing one (commands wait and are sent "
                            "again; 0 = fail at once): seconds, or 500ms, 2m",
     cxxopts::value<std::string>()->default_value("120"))
    ("transport", "url (iscsi:// = TCP, iser:// = iSER), tcp, iser, or auto (iSER, else TCP)",
     cxxopts::value<std::string>()->default_value("url"))
    ("iser-max-transfer", "over iSER: the largest SCSI command in bytes (the target's MAXIMUM TRANSFER LENGTH "
                          "lowers it; a target that states none gets 524288); larger I/O is split",
     cxxopts::value<std::string>()->default_value("8M"))
    ("iser-stags", "over iSER: how command buffers are exposed to the target: automatic (a memory window per "
                   "command where the device has them, else the whole registered pool), per-command, whole-slab",
     cxxopts::value<std::string>())
    ("command", "discover|inquiry|readcap|luns|read|write|copy|status", cxxopts::value<std::string>())
    ("url", "iscsi:// or iser:// URL", cxxopts::value<std::string>())
    ("destination-url", "copy: the destination's URL", cxxopts::value<std::string>());
  opts.parse_positional({"command", "url", "destination-url"});
  opts.positional_help("COMMAND URL [DST-URL]");
  try {
    auto args = opts.parse(argc, argv);
    if (args.count("help")) {
      std::cout << opts.help() << "\n";
      return 0;
    }
    if (args.count("version")) {
      std::cout << "iserkit " << ISERKIT_VERSION << "\n";
      return 0;
    }
    json_output = args.count("json") > 0;
    iserkit::log::set_level(iserkit::cli::log_level_option(args["log-level"].as<std::string>()));
    if (!args.count("command") || !args.count("url")) return error("iserkit", "missing command or URL", "usage=iserkit --help", ExitStatus::usage);
    Common c;
    if (args.count("initiator-name")) {
      c.options.initiator_name = args["initiator-name"].as<std::string>();
      ik::check_initiator_name(c.options.initiator_name);
    }
    c.options.header_digest = ik::digest_option("header-digest", args["header-digest"].as<std::string>());
    c.options.data_digest = ik::digest_option("data-digest", args["data-digest"].as<std::string>());
    using std::chrono::milliseconds;
    // --timeout, --nop-interval, --nop-timeout were milliseconds: a bare number keeps that unit (with
    // a warning) so that no script's timeout silently becomes a thousand times longer.
    const auto old_millis = [&](const char* name, milliseconds min) {
      const auto text = args[name].as<std::string>();
      if (iserkit::cli::is_bare_number(text) && text != "0")
        iserkit::log::warn("iserkit: --{} {}: a bare number here is milliseconds (deprecated); write {}ms or a "
                           "number of seconds with s", name, text, text);
      return iserkit::cli::duration_option(name, text, min, std::chrono::hours(24 * 365),
                                           iserkit::cli::BareUnit::milliseconds);
    };
    if (args.count("command-timeout") && args.count("timeout"))
      return error("iserkit", "give --command-timeout or --timeout (deprecated), not both", {}, ExitStatus::usage);
    if (args.count("command-timeout")) {
      c.options.command_timeout = iserkit::cli::duration_option("command-timeout", args["command-timeout"].as<std::string>());
    } else if (args.count("timeout")) {
      iserkit::log::warn("iserkit: --timeout is deprecated: write --command-timeout (a bare number is seconds there)");
      c.options.command_timeout = old_millis("timeout", milliseconds(0));
    }
    c.options.nop_interval = old_millis("nop-interval", milliseconds(0));
    c.options.nop_timeout = old_millis("nop-timeout", milliseconds(1));
    c.options.replacement_timeout =
        iserkit::cli::duration_option("replacement-timeout", args["replacement-timeout"].as<std::string>());
    auto gathered = ik::gather_chap_sources(
        argc, argv, args.count("chap-file") ? std::optional(args["chap-file"].as<std::string>()) : std::nullopt,
        [] {
          iserkit::log::warn("iserkit: the URL holds a CHAP secret, which other users could see in ps; use "
                             "--chap-file or LIBISCSI_CHAP_PASSWORD");
        },
        /*clear_environment=*/false);
    if (!gathered) return error("iserkit", "bad --chap-file", gathered.error(), ExitStatus::usage);
    ik::ChapSources chap = std::move(*gathered);
    if (args.count("chap-user")) chap.command_line.user = args["chap-user"].as<std::string>();
    if (args.count("secret-file")) chap.command_line.secret = read_secret(args["secret-file"].as<std::string>());
    if (args.count("target-user")) chap.command_line.target_user = args["target-user"].as<std::string>();
    if (args.count("target-secret-file"))
      chap.command_line.target_secret = read_secret(args["target-secret-file"].as<std::string>());
    if (args.count("chap-algorithms")) {
      c.options.chap.algorithms.clear();
      std::string list = args["chap-algorithms"].as<std::string>();
      for (std::size_t pos = 0; pos <= list.size();) {
        const auto comma = std::min(list.find(',', pos), list.size());
        auto a = iserkit::iscsi::parse_chap_algorithm(list.substr(pos, comma - pos));
        if (!a) return error("iserkit", "unknown CHAP algorithm", "value=" + list.substr(pos, comma - pos), ExitStatus::usage);
        c.options.chap.algorithms.push_back(*a);
        pos = comma + 1;
      }
    }
    c.options.transport = ik::transport_option(args["transport"].as<std::string>());
    c.options.iser_max_transfer_bytes = static_cast<std::uint32_t>(
        iserkit::cli::size_option("iser-max-transfer", args["iser-max-transfer"].as<std::string>(), 4096, UINT32_MAX));
    c.options.iser_unstated_max_transfer_bytes =
        std::min(c.options.iser_unstated_max_transfer_bytes, c.options.iser_max_transfer_bytes);
    if (args.count("iser-stags")) c.options.iser_stags = ik::iser_stags_option(args["iser-stags"].as<std::string>());
    using iserkit::cli::ProgressMode;
    const auto progress = iserkit::cli::enum_option<ProgressMode>(
        "progress", args["progress"].as<std::string>(),
        {{"auto", ProgressMode::automatic}, {"always", ProgressMode::always}, {"never", ProgressMode::never}});
    c.progress = iserkit::cli::progress_enabled(progress);
    const auto command = args["command"].as<std::string>();
    const auto url = args["url"].as<std::string>();
    if (command == "status") return cmd_status(url);
    // A URL that does not parse is reported by the command itself.
    if (auto parsed = ik::parse_url(url)) {
      auto resolved = ik::resolve_chap(*parsed, chap, c.options.chap);
      if (!resolved) return error(command, resolved.error(), {}, ExitStatus::usage);
      c.options.chap = std::move(*resolved);
      ik::check_chap_names(c.options.chap, "CHAP credentials (the URL, --chap-user, --target-user, --chap-file or "
                                           "LIBISCSI_CHAP_*)");
    }
    if (command == "discover") return cmd_discover(c, url);
    if (command == "inquiry") return cmd_inquiry(c, url);
    if (command == "readcap") return cmd_readcap(c, url);
    if (command == "luns") return cmd_luns(c, url);
    if (command == "read") {
      std::optional<std::uint64_t> length;
      if (args.count("length")) length = iserkit::cli::size_option("length", args["length"].as<std::string>());
      return cmd_read(c, url, iserkit::cli::size_option("offset", args["offset"].as<std::string>()), length,
                      args["output"].as<std::string>());
    }
    if (command == "copy") {
      if (!args.count("destination-url"))
        return error("copy", "missing the destination URL", "usage=iserkit copy SRC-URL DST-URL", ExitStatus::usage);
      iserkit::cli::CopyArguments copy;
      copy.source_offset_bytes = iserkit::cli::size_option("offset", args["offset"].as<std::string>());
      copy.destination_offset_bytes = iserkit::cli::size_option("dst-offset", args["dst-offset"].as<std::string>());
      if (args.count("length")) copy.length_bytes = iserkit::cli::size_option("length", args["length"].as<std::string>());
      using iserkit::cli::CopyMethod;
      copy.method = iserkit::cli::enum_option<CopyMethod>(
          "method", args["method"].as<std::string>(),
          {{"auto", CopyMethod::automatic}, {"xcopy", CopyMethod::xcopy}, {"read-write", CopyMethod::read_write}});
      return cmd_copy(c, url, args["destination-url"].as<std::string>(), copy);
    }
    if (args.count("destination-url"))
      return error(command, "unexpected second URL", "url=" + redact(args["destination-url"].as<std::string>()),
                   ExitStatus::usage);
    if (command == "write")
      return cmd_write(c, url, iserkit::cli::size_option("offset", args["offset"].as<std::string>()),
                       args["input"].as<std::string>(), args.count("fua") > 0);
    return error("iserkit", "unknown command", "command=" + command, ExitStatus::usage);
  } catch (const cxxopts::exceptions::exception& e) {
    return error("iserkit", "bad arguments", std::string("reason=") + e.what(), ExitStatus::usage);
  } catch (const iserkit::cli::BadValue& e) {  // the shared grammar: the message lists what is accepted
    return error("iserkit", e.what(), {}, ExitStatus::usage);
  } catch (const std::runtime_error& e) {  // a --secret-file that cannot be read, bad CHAP names
    return error("iserkit", e.what(), {}, ExitStatus::usage);
  }
}
