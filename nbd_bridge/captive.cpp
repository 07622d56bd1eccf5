// --run CMD captive mode and --fork / --pid-file (see captive.hpp).
#include "nbd_bridge/captive.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace iserkit::nbd {
namespace {

std::error_code errno_code() { return {errno, std::generic_category()}; }

std::string percent_encode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

Result<void> exit_with_parent(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return fail(errno_code());
  // The parent may have exited before the prctl(): then nothing would ever send the signal.
  if (::getppid() != parent) return fail(std::errc::no_such_process);
  return {};
}

std::string nbd_uri(const ServedAddress& address) {
  const std::string name = percent_encode(address.export_name);
  const std::string scheme = address.tls ? "nbds" : "nbd";
  const std::string user = address.tls && !address.tls_username.empty() ? percent_encode(address.tls_username) + "@" : "";
  std::vector<std::string> query;
  if (!address.unix_socket.empty()) query.push_back("socket=" + percent_encode(address.unix_socket));
  if (address.tls && !address.tls_psk_file.empty()) query.push_back("tls-psk-file=" + percent_encode(address.tls_psk_file));
  if (address.tls && !address.tls_certificates.empty()) {
    query.push_back("tls-certificates=" + percent_encode(address.tls_certificates));
  }
  std::string tail;
  for (const auto& q : query) tail += (tail.empty() ? "?" : "&") + q;
  if (!address.unix_socket.empty()) return scheme + "+unix://" + user + "/" + name + tail;
  std::string host = address.tcp_host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return scheme + "://" + user + host + ":" + std::to_string(address.tcp_port) + "/" + name + tail;
}

std::vector<std::string> captive_environment(const ServedAddress& address) {
  const std::string uri = nbd_uri(address);
  return {"uri=" + uri, "nbd=" + uri, "unixsocket=" + address.unix_socket,
          "port=" + (address.tcp_port != 0 ? std::to_string(address.tcp_port) : std::string()),
          "exportname=" + address.export_name};
}

Result<pid_t> spawn_command(const std::string& command, const std::vector<std::string>& extra_env) {
  // Build argv and envp before fork: the child may only call async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (const auto& extra : extra_env) {
      const auto eq = extra.find('=');
      if (entry.substr(0, eq + 1) == std::string_view(extra).substr(0, eq + 1)) replaced = true;
    }
    if (!replaced) env_strings.emplace_back(entry);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  const pid_t pid = ::fork();
  if (pid < 0) return fail(errno_code());
  if (pid == 0) {
    // Undo what the server set for itself: the command gets default signal handling.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

std::optional<int> reap_command(pid_t pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return shell_status(status);
  if (r < 0 && errno == ECHILD) return 127;  // already reaped elsewhere: report a failure, never hang
  return std::nullopt;
}

int wait_command(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return shell_status(status);
}

Result<int> daemonize_begin() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(errno_code());
  const pid_t pid = ::fork();
  if (pid < 0) return fail(errno_code());
  if (pid > 0) {
    ::close(fds[1]);
    char byte = 0;
    ssize_t n;
    do {
      n = ::read(fds[0], &byte, 1);
    } while (n < 0 && errno == EINTR);
    // One byte: the child is serving. EOF: it exited (or closed the pipe) before that.
    std::_Exit(n == 1 ? 0 : 1);
  }
  ::close(fds[0]);
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::close(null);
  }
  return fds[1];
}

void daemon_ready(int ready_fd, bool keep_stderr) {
  if (ready_fd < 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  // stdout always: everything the bridge prints there (the "serving" lines, --print-uri) is printed
  // by now, and a caller reading it through a pipe (uri=$(iserkit-nbd --fork --print-uri ...))
  // waits for its end. stderr stays when it is not a terminal (a log file).
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    if (!keep_stderr) ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  const char byte = 1;
  while (::write(ready_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(ready_fd);
}

Result<void> write_pid_file(const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ::getpid() << "\n";
    out.flush();
    if (!out) return fail(std::make_error_code(std::errc::io_error));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail(errno_code());
  return {};
}

std::string client_host(const std::string& listen_host) {
  if (listen_host == "*" || listen_host == "0.0.0.0" || listen_host.empty()) return "127.0.0.1";
  if (listen_host == "::") return "::1";
  return listen_host;
}

Result<PrivateSocket> PrivateSocket::create() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/iserkit-nbd.XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return fail(errno_code());
  PrivateSocket socket;
  socket.dir_ = templ;
  return socket;
}

PrivateSocket& PrivateSocket::operator=(PrivateSocket&& other) noexcept {
  if (this != &other) {
    this->~PrivateSocket();
    dir_ = std::exchange(other.dir_, {});
  }
  return *this;
}

PrivateSocket::~PrivateSocket() {
  if (dir_.empty()) return;
  ::unlink(path().c_str());
  ::rmdir(dir_.c_str());
  dir_.clear();
}

bool CaptiveCommand::finished(int& status) {
  if (pid_ <= 0) return false;
  auto r = reap_command(pid_);
  if (!r) return false;
  status = *r;
  pid_ = -1;
  return true;
}

int CaptiveCommand::stop_and_wait() {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGTERM);
  const int status = wait_command(pid_);
  pid_ = -1;
  return status;
}

Result<void> begin_process_mode(ProcessMode& mode) {
  if (!mode.daemonize) return {};
  auto fd = daemonize_begin();
  if (!fd) return fail(fd.error());
  mode.ready_fd = *fd;
  return {};
}

Result<CaptiveCommand> start_process_mode(const ProcessMode& mode, const ServedAddress& served) {
  if (!mode.pid_file.empty()) {
    if (auto r = write_pid_file(mode.pid_file); !r) {
      return fail(std::error_code(r.error().value(), std::generic_category()));
    }
  }
  // Keep stderr when it goes to a file or pipe (logs); a terminal is let go with the session.
  daemon_ready(mode.ready_fd, ::isatty(STDERR_FILENO) == 0);
  if (mode.run_command.empty()) return CaptiveCommand{};
  auto pid = spawn_command(mode.run_command, captive_environment(served));
  if (!pid) return fail(pid.error());
  return CaptiveCommand{*pid};
}

}  // namespace iserkit::nbd
