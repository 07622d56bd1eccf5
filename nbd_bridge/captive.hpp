// Process modes of the bridge executables (layer 6): `--run CMD` captive mode as nbdkit has it
// (run CMD once the export is served, with $uri, $nbd and $unixsocket describing it, serve until it
// exits, exit with its status), and `--fork` / `--pid-file FILE` as qemu-nbd has them (go to the
// background once the listening socket is ready; write the server's pid).
//
// --exit-with-parent (nbdkit's): the bridge gets SIGTERM when the process that started it exits.
//
// --fork forks before anything else (no threads, no io_context yet): the parent waits on a pipe and
// exits 0 when the child reports ready, or 1 when the child exits or fails first. The child starts a
// new session (setsid) and points stdin at /dev/null.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "iserkit/common/result.hpp"

namespace iserkit::nbd {

/// How clients reach the served export; the basis of the variables given to `--run CMD`.
struct ServedAddress {
  std::string unix_socket;  ///< a Unix socket path, or empty
  std::string tcp_host;     ///< the TCP host as clients should name it ("127.0.0.1", "::1"), or empty
  std::uint16_t tcp_port = 0;
  std::string export_name;  ///< the export name in the URI ("" = the default export)
  bool tls = false;         ///< --tls=require: the URI is nbds:// / nbds+unix:// (libnbd then insists on TLS)
  std::string tls_username;      ///< with tls: the PSK identity (URI user part), or empty
  std::string tls_psk_file;      ///< with tls: the key file (query tls-psk-file=), or empty
  std::string tls_certificates;  ///< with tls: the directory holding ca-cert.pem (query tls-certificates=), or empty
};

/// The NBD URI for `address` (the libnbd/qemu URI syntax, NBD URI spec doc/uri.md):
/// "nbd+unix:///NAME?socket=PATH" when a Unix socket is served, else "nbd://HOST:PORT/NAME" (IPv6
/// hosts in brackets). The export name is percent-encoded. With `tls`: "nbds+unix://" / "nbds://",
/// the PSK identity as the user part, and tls-psk-file= / tls-certificates= query parameters
/// (libnbd's URI keys) when set.
std::string nbd_uri(const ServedAddress& address);

/// The environment entries "uri=…", "nbd=…" (the same URI; nbdkit's older name), "unixsocket=…"
/// (empty without a Unix socket), "port=…" (empty without TCP) and "exportname=…" for `--run`.
std::vector<std::string> captive_environment(const ServedAddress& address);

/// Starts `/bin/sh -c command` with the current environment plus `extra_env` (NAME=VALUE), so the
/// command may say $uri, $nbd or $unixsocket. Returns the child's pid, or the errno of fork().
Result<pid_t> spawn_command(const std::string& command, const std::vector<std::string>& extra_env);

/// If child `pid` has ended, reaps it and returns its exit status as a shell reports it (the exit
/// code, or 128 + the signal number); nullopt while it runs. Never blocks.
std::optional<int> reap_command(pid_t pid);

/// Waits for child `pid` to end and returns its status as reap_command() does.
int wait_command(pid_t pid);

/// --fork, first half: called at the very start of main(), before any thread or io_context exists.
/// In the parent this never returns: it waits until the child calls daemon_ready() (exit 0) or
/// exits (exit 1, the child has printed why). In the child it returns the write end of the pipe.
/// Errors: the errno of pipe() or fork().
Result<int> daemonize_begin();

/// --fork, second half (in the child, once listening): tells the parent to exit 0, closes the pipe,
/// points stdout at /dev/null (so that a caller reading it through a pipe sees its end), and stderr
/// too unless `keep_stderr`. `ready_fd` < 0 does nothing.
void daemon_ready(int ready_fd, bool keep_stderr);

/// Writes the current pid and a newline to `path` (written to PATH.tmp, then renamed, so a reader
/// never sees an empty file). Errors: the errno of the write or rename.
Result<void> write_pid_file(const std::string& path);

/// --exit-with-parent (nbdkit's): asks the kernel for SIGTERM when the parent process exits
/// (prctl(PR_SET_PDEATHSIG); SIGTERM is the bridge's orderly shutdown). `parent` is getppid() as
/// read before the call: if the parent has already gone (the process was re-parented), returns
/// std::errc::no_such_process so that the caller exits at once. Not with --fork (the forked child
/// would lose the setting and its parent exits on purpose). Errors: the errno of prctl().
Result<void> exit_with_parent(pid_t parent);

/// The host a client should connect to for a server listening on `listen_host`: the loopback
/// address for the wildcards ("*", "0.0.0.0" → "127.0.0.1"; "::" → "::1"), else `listen_host`.
std::string client_host(const std::string& listen_host);

/// A private directory (mkdtemp under $TMPDIR or /tmp, mode 0700) holding one socket path, for
/// `--run` without --socket/--listen; removed (socket and directory) on destruction.
class PrivateSocket {
 public:
  PrivateSocket() = default;
  /// Creates the directory. Errors: the errno of mkdtemp().
  static Result<PrivateSocket> create();
  PrivateSocket(PrivateSocket&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}
  PrivateSocket& operator=(PrivateSocket&& other) noexcept;
  PrivateSocket(const PrivateSocket&) = delete;
  PrivateSocket& operator=(const PrivateSocket&) = delete;
  ~PrivateSocket();
  /// DIR/nbd.sock (empty before create()).
  [[nodiscard]] std::string path() const { return dir_.empty() ? std::string() : dir_ + "/nbd.sock"; }

 private:
  std::string dir_;
};

/// What the command line asked for: `--run CMD`, `--fork`, `--pid-file PATH`.
struct ProcessMode {
  std::string run_command;  ///< empty: no captive command
  std::string pid_file;     ///< empty: no pid file
  bool daemonize = false;   ///< --fork
  int ready_fd = -1;        ///< set by begin_process_mode() in the forked child
};

/// The captive command, once started (or none).
class CaptiveCommand {
 public:
  CaptiveCommand() = default;
  explicit CaptiveCommand(pid_t pid) : pid_(pid) {}
  /// True while a command was started and has not been reaped.
  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
  /// If the command has ended: reaps it, stores its status in `status` and returns true.
  bool finished(int& status);
  /// Sends SIGTERM to the command and waits for it; returns its status.
  int stop_and_wait();

 private:
  pid_t pid_ = -1;
};

/// Start of main(): with --fork, forks (the parent waits and exits; see daemonize_begin()) and
/// stores the readiness pipe in `mode.ready_fd`. Without --fork does nothing.
Result<void> begin_process_mode(ProcessMode& mode);

/// Once every listening socket is ready: writes the pid file, tells a --fork parent to exit, and
/// starts the --run command with captive_environment(`served`). Errors: a message-carrying
/// std::errc for the pid file or the command (the caller exits 1).
Result<CaptiveCommand> start_process_mode(const ProcessMode& mode, const ServedAddress& served);

}  // namespace iserkit::nbd
