// nbd_memory_server: a test NBD server serving a MemoryExport through nbd_bridge's Server, for the
// libnbd interop tests. Modes: --unix PATH, --tcp HOST:PORT, --stdio (serve the socket on stdin, as
// libnbd's nbd_connect_command / `nbdkit -s`), and systemd socket activation (LISTEN_PID/LISTEN_FDS,
// as libnbd's `[ CMD ]` and nbd_connect_systemd_socket_activation). Logs go to stderr only.
// `--delay-us N` wraps the export so every operation completes after a random 0..N µs delay,
// which makes replies leave out of order and keeps many requests in flight.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cxxopts.hpp>

#include "iserkit/common/cli_values.hpp"
#include <fstream>
#include <iostream>
#include <random>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/service_manager.hpp"
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/server.hpp"

#include <boost/asio/this_coro.hpp>

namespace nbd = iserkit::nbd;
namespace asio = iserkit::asio;
using iserkit::Awaitable;

namespace {

/// Delays each operation of the wrapped export by a random 0..max_delay_us microseconds.
class DelayedExport final : public nbd::Export {
 public:
  DelayedExport(std::shared_ptr<nbd::Export> inner, unsigned max_delay_us)
      : inner_(std::move(inner)), max_delay_us_(max_delay_us) {}
  nbd::ExportInfo info() const override { return inner_->info(); }
  Awaitable<std::error_code> read(std::uint64_t offset, iserkit::ByteSpan dest) override {
    co_await delay();
    co_return co_await inner_->read(offset, dest);
  }
  Awaitable<std::error_code> write(std::uint64_t offset, iserkit::ConstByteSpan src, bool fua) override {
    co_await delay();
    co_return co_await inner_->write(offset, src, fua);
  }
  Awaitable<std::error_code> flush() override {
    co_await delay();
    co_return co_await inner_->flush();
  }
  Awaitable<std::error_code> trim(std::uint64_t offset, std::uint64_t length, bool fua) override {
    co_await delay();
    co_return co_await inner_->trim(offset, length, fua);
  }
  Awaitable<std::error_code> write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim,
                                          bool fua) override {
    co_await delay();
    co_return co_await inner_->write_zeroes(offset, length, may_trim, fua);
  }
  Awaitable<std::error_code> block_status(std::uint64_t offset, std::uint32_t length, bool one,
                                          std::vector<nbd::BlockExtent>& extents) override {
    co_await delay();
    co_return co_await inner_->block_status(offset, length, one, extents);
  }

 private:
  Awaitable<void> delay() {
    unsigned us = 0;
    {
      std::lock_guard lock(mutex_);
      us = std::uniform_int_distribution<unsigned>(0, max_delay_us_)(random_);
    }
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::microseconds(us));
    boost::system::error_code ec;
    co_await timer.async_wait(iserkit::use_awaitable_ec(ec));
  }
  std::shared_ptr<nbd::Export> inner_;
  unsigned max_delay_us_;
  std::mutex mutex_;
  std::mt19937 random_{12345};
};

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("nbd_memory_server"));
  cxxopts::Options cli("nbd_memory_server", "Serve an in-memory NBD export (test server)");
  cli.add_options()
      ("size", "export size (e.g. 64M)", cxxopts::value<std::string>()->default_value("64M"))
      ("name", "export name", cxxopts::value<std::string>()->default_value("memory"))
      ("description", "export description", cxxopts::value<std::string>()->default_value("iserkit test export"))
      ("unix", "listen on this Unix socket path", cxxopts::value<std::string>())
      ("tcp", "listen on HOST:PORT (port 0 = any; the port is printed on stderr)", cxxopts::value<std::string>())
      ("port-file", "write the bound TCP port to this file", cxxopts::value<std::string>())
      ("stdio", "serve the connected socket on stdin (nbd_connect_command)")
      ("persistent", "with socket activation, keep running after the last client leaves")
      ("read-only", "force read-only")
      ("min-block", "minimum block size in bytes", cxxopts::value<std::string>()->default_value("1"))
      ("max-block", "maximum payload in bytes", cxxopts::value<std::string>()->default_value("32M"))
      ("max-in-flight", "requests in flight per connection", cxxopts::value<std::size_t>()->default_value("64"))
      ("delay-us", "random delay of every operation, 0..N microseconds", cxxopts::value<unsigned>()->default_value("0"))
      ("handshake-limit", "seconds a client has for the handshake (0: none)",
       cxxopts::value<double>()->default_value("10"))
      ("fail-at", "OFFSET:LENGTH range where every operation fails with EIO", cxxopts::value<std::string>())
      ("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("warn"))
      ("h,help", "this help");
  try {
    auto args = cli.parse(argc, argv);
    if (args.count("help")) {
      std::cout << cli.help() << "\n";
      return 0;
    }
    iserkit::log::set_level(args["log-level"].as<std::string>());
    auto size = iserkit::cli::parse_size(args["size"].as<std::string>());
    if (!size) throw std::runtime_error("bad --size");
    auto min_block = iserkit::cli::parse_size(args["min-block"].as<std::string>());
    auto max_block = iserkit::cli::parse_size(args["max-block"].as<std::string>());
    if (!min_block || !max_block || *min_block > 65536 || *max_block > UINT32_MAX) {
      throw std::runtime_error("bad --min-block or --max-block");
    }
    auto memory = std::make_shared<nbd::MemoryExport>(nbd::MemoryExportOptions{
        .size_bytes = *size,
        .name = args["name"].as<std::string>(),
        .description = args["description"].as<std::string>(),
        .min_block_size_bytes = static_cast<std::uint32_t>(*min_block),
        .preferred_block_size_bytes = std::max<std::uint32_t>(4096, static_cast<std::uint32_t>(*min_block)),
        .max_block_size_bytes = static_cast<std::uint32_t>(*max_block)});
    if (args.count("fail-at")) {
      const std::string spec = args["fail-at"].as<std::string>();
      const auto colon = spec.find(':');
      auto offset = iserkit::cli::parse_size(spec.substr(0, colon));
      auto length = iserkit::cli::parse_size(colon == std::string::npos ? "" : spec.substr(colon + 1));
      if (!offset || !length) throw std::runtime_error("bad --fail-at");
      memory->inject_failure(*offset, *length, std::make_error_code(std::errc::io_error));
    }
    std::shared_ptr<nbd::Export> exported = memory;
    if (const unsigned delay = args["delay-us"].as<unsigned>(); delay > 0) {
      exported = std::make_shared<DelayedExport>(exported, delay);
    }

    asio::io_context io;
    asio::signal_set signals(io, SIGINT, SIGTERM);
    // Socket activation (nbdinfo's [ CMD ], systemd-socket-activate): sd_listen_fds through libsystemd.
    const auto passed = iserkit::service::passed_sockets();
    if (!passed) {
      std::cerr << "nbd_memory_server: socket activation: " << passed.error().message() << "\n";
      return 1;
    }
    const std::vector<int>& activation_fds = *passed;
    const bool one_shot = args.count("stdio") || (!activation_fds.empty() && !args.count("persistent"));
    std::unique_ptr<nbd::Server> server;
    nbd::ServerOptions options{.read_only = args.count("read-only") > 0,
                               .max_requests_in_flight = args["max-in-flight"].as<std::size_t>()};
    options.handshake_limit =
        std::chrono::milliseconds(static_cast<std::int64_t>(args["handshake-limit"].as<double>() * 1000));
    if (one_shot) {
      // Like qemu-nbd without --persistent: exit once the last client has gone.
      options.on_connection_closed = [&](std::size_t open) {
        if (open == 0) {
          asio::post(io, [&] {
            server->stop();
            signals.cancel();
          });
        }
      };
    }
    server = std::make_unique<nbd::Server>(io, exported, options);

    if (args.count("stdio")) {
      // Keep only our own descriptor for the socket: stdout must not hold it open after we close it,
      // and nothing may ever be printed on it.
      const int fd = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::close(null);
      if (auto r = server->serve_connected(fd); !r) throw std::runtime_error("--stdio: " + r.error().message());
    }
    for (int fd : activation_fds) {
      if (auto r = server->adopt_listener(fd); !r) throw std::runtime_error("LISTEN_FDS: " + r.error().message());
    }
    if (args.count("unix")) {
      if (auto r = server->listen_unix(args["unix"].as<std::string>()); !r)
        throw std::runtime_error("--unix: " + r.error().message());
    }
    if (args.count("tcp")) {
      const std::string spec = args["tcp"].as<std::string>();
      const auto colon = spec.rfind(':');
      if (colon == std::string::npos) throw std::runtime_error("--tcp wants HOST:PORT");
      auto port = server->listen_tcp(spec.substr(0, colon),
                                     static_cast<std::uint16_t>(std::stoi(spec.substr(colon + 1))));
      if (!port) throw std::runtime_error("--tcp: " + port.error().message());
      std::cerr << "port " << *port << std::endl;
      if (args.count("port-file")) {
        const std::string path = args["port-file"].as<std::string>();
        std::ofstream(path + ".tmp") << *port << "\n";
        std::rename((path + ".tmp").c_str(), path.c_str());  // appears complete or not at all
      }
    }
    if (!args.count("stdio") && activation_fds.empty() && !args.count("unix") && !args.count("tcp")) {
      throw std::runtime_error("nothing to serve: give --unix, --tcp, --stdio or use socket activation");
    }

    // On SIGINT/SIGTERM: stop accepting, let clients finish their requests, then io.run() returns.
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (!ec) server->stop();
    });
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "nbd_memory_server: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
