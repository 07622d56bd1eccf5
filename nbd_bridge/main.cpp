// iserkit-nbd: serves one remote SCSI LUN (iscsi:// URL) as an NBD export on a Unix socket and/or a
// TCP address, so the kernel's nbd client, qemu, nbdcopy, nbdfuse or fio can attach it.
// THREAD MODEL: one io_context on the main thread runs the iSCSI session and the NBD server;
// every NBD request becomes SCSI commands on the session without a thread hop.
// The session runs over TCP (iscsi://) or iSER (iser://, RFC 7145); --transport overrides. NBD
// payload buffers come from the session's pool, so over iSER they are the registered memory the
// target RDMA-reads and -writes: no copy in user space (counted, printed at exit).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <cxxopts.hpp>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"
#include "nbd_bridge/lun_export.hpp"
#include "nbd_bridge/server.hpp"

namespace {

using namespace iserkit;

struct Config {
  initiator::Url url;
  std::string socket_path;
  std::string listen;
  std::string port_file;
  std::string name;
  bool read_only = false;
  std::string stats_file;
  initiator::SessionOptions session;
};

// Splits "host:port", "[v6]:port" or ":port".
bool split_host_port(const std::string& s, std::string& host, std::uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "*";
  try {
    const int p = std::stoi(s.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    port = static_cast<std::uint16_t>(p);
  } catch (...) {
    return false;
  }
  return true;
}

Awaitable<int> run(asio::io_context& io, Config cfg) {
  auto ex = co_await asio::this_coro::executor;
  auto session = co_await initiator::Session::connect(ex, cfg.url, cfg.session);
  if (!session) {
    std::cerr << "iserkit-nbd: login: " << session.error().message() << ": url=" << initiator::format_url(cfg.url)
              << "\n";
    co_return 1;
  }
  log::info("iserkit-nbd: logged in over {}", (*session)->transport() == datamover::Transport::iser ? "iSER" : "TCP");
  const auto lun_index = cfg.url.lun.value_or(0);
  auto lun = co_await initiator::LunHandle::open(*session, scsi::Lun::from_index(lun_index));
  if (!lun) {
    std::cerr << "iserkit-nbd: open LUN: " << lun.error().message() << ": lun=" << lun_index << "\n";
    (*session)->close();
    co_return 1;
  }
  const auto cap = lun->info().capacity;
  auto exported = std::make_shared<nbd::LunExport>(
      *lun, nbd::LunExportOptions{.name = cfg.name.empty() ? cfg.url.target + "/" + std::to_string(lun_index) : cfg.name,
                                  .description = initiator::format_url(cfg.url),
                                  .read_only = cfg.read_only});
  nbd::Server server(io, exported, {.read_only = cfg.read_only, .single_threaded = true});
  bool listening = false;
  for (int fd : nbd::Server::systemd_listen_fds()) {
    if (auto r = server.adopt_listener(fd); !r) {
      std::cerr << "iserkit-nbd: socket activation: " << r.error().message() << "\n";
      co_return 1;
    }
    listening = true;
  }
  if (!cfg.socket_path.empty()) {
    if (auto r = server.listen_unix(cfg.socket_path); !r) {
      std::cerr << "iserkit-nbd: listen: " << r.error().message() << ": socket=" << cfg.socket_path << "\n";
      co_return 1;
    }
    std::cout << "serving " << initiator::format_url(cfg.url) << " (" << cap.size_bytes() << " bytes, "
              << cap.block_size_bytes << "-byte blocks) on unix:" << cfg.socket_path << std::endl;
    listening = true;
  }
  if (!cfg.listen.empty()) {
    std::string host;
    std::uint16_t port = 0;
    if (!split_host_port(cfg.listen, host, port)) {
      std::cerr << "iserkit-nbd: --listen wants HOST:PORT, got " << cfg.listen << "\n";
      co_return 1;
    }
    auto bound = server.listen_tcp(host, port);
    if (!bound) {
      std::cerr << "iserkit-nbd: listen: " << bound.error().message() << ": address=" << cfg.listen << "\n";
      co_return 1;
    }
    std::cout << "serving " << initiator::format_url(cfg.url) << " (" << cap.size_bytes() << " bytes) on tcp:"
              << host << ":" << *bound << std::endl;
    if (!cfg.port_file.empty()) std::ofstream(cfg.port_file) << *bound << "\n";
    listening = true;
  }
  if (!listening) {
    std::cerr << "iserkit-nbd: nothing to listen on: give --socket PATH or --listen HOST:PORT\n";
    co_return 1;
  }

  asio::signal_set signals(ex, SIGINT, SIGTERM);
  boost::system::error_code ec;
  co_await signals.async_wait(use_awaitable_ec(ec));
  log::info("iserkit-nbd: shutting down");
  server.stop();
  co_await (*session)->logout();
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("iserkit-nbd", "Serve a remote iSCSI LUN as an NBD export.\n"
                                          "Usage: iserkit-nbd iscsi://HOST[:PORT]/TARGET-IQN/LUN --socket PATH\n"
                                          "       iserkit-nbd iser://HOST[:PORT]/TARGET-IQN/LUN --socket PATH   (iSER, RDMA)");
  options.add_options()
      ("url", "iSCSI URL of the LUN", cxxopts::value<std::string>())
      ("s,socket", "serve on this Unix socket path", cxxopts::value<std::string>())
      ("l,listen", "serve on TCP HOST:PORT ([::]:10809, 127.0.0.1:0 for any free port)", cxxopts::value<std::string>())
      ("port-file", "write the bound TCP port to this file", cxxopts::value<std::string>())
      ("n,name", "export name (default TARGET/LUN; the empty name is always accepted)", cxxopts::value<std::string>())
      ("r,read-only", "serve read-only")
      ("initiator-name", "InitiatorName to log in with", cxxopts::value<std::string>())
      ("digest", "header and data digests to offer: none or crc32c", cxxopts::value<std::string>()->default_value("none"))
      ("transport", "url (iscsi:// = TCP, iser:// = iSER), tcp, iser, or auto (iSER, else TCP)",
       cxxopts::value<std::string>()->default_value("url"))
      ("stats-file", "at exit, write counters (copied_payload_bytes=N) to PATH", cxxopts::value<std::string>())
      ("log-level", "trace, debug, info, warn, error, off", cxxopts::value<std::string>()->default_value("warn"))
      ("version", "print the version")
      ("h,help", "print this help");
  options.parse_positional({"url"});
  options.positional_help("URL");
  Config cfg;
  try {
    auto args = options.parse(argc, argv);
    if (args.count("help")) {
      std::cout << options.help() << "\n";
      return 0;
    }
    if (args.count("version")) {
      std::cout << "iserkit-nbd " << ISERKIT_VERSION << "\n";
      return 0;
    }
    if (!args.count("url")) {
      std::cerr << "iserkit-nbd: missing URL (see --help)\n";
      return 2;
    }
    auto url = initiator::parse_url(args["url"].as<std::string>());
    if (!url || url->target.empty()) {
      std::cerr << "iserkit-nbd: bad URL: want iscsi://HOST[:PORT]/TARGET-IQN/LUN (or iser://)\n";
      return 2;
    }
    cfg.url = *url;
    if (args.count("socket")) cfg.socket_path = args["socket"].as<std::string>();
    if (args.count("listen")) cfg.listen = args["listen"].as<std::string>();
    if (args.count("port-file")) cfg.port_file = args["port-file"].as<std::string>();
    if (args.count("name")) cfg.name = args["name"].as<std::string>();
    cfg.read_only = args.count("read-only") > 0;
    if (args.count("initiator-name")) cfg.session.initiator_name = args["initiator-name"].as<std::string>();
    const auto digest = args["digest"].as<std::string>();
    if (digest != "none" && digest != "crc32c") {
      std::cerr << "iserkit-nbd: --digest wants none or crc32c\n";
      return 2;
    }
    const auto d = digest == "crc32c" ? initiator::Digest::crc32c : initiator::Digest::none;
    cfg.session.header_digest = cfg.session.data_digest = d;
    const auto transport = initiator::parse_transport_policy(args["transport"].as<std::string>());
    if (!transport) {
      std::cerr << "iserkit-nbd: --transport wants url, tcp, iser or auto\n";
      return 2;
    }
    cfg.session.transport = *transport;
    if (args.count("stats-file")) cfg.stats_file = args["stats-file"].as<std::string>();
    log::set_level(args["log-level"].as<std::string>());
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "iserkit-nbd: " << e.what() << "\n";
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  int rc = 1;
  const std::string stats_file = cfg.stats_file;
  asio::co_spawn(io, run(io, std::move(cfg)), [&](std::exception_ptr e, int r) {
    rc = e ? 1 : r;
    io.stop();
  });
  io.run();
  // Payload bytes our code copied in user space (copy_counter.hpp): NBD buffers go to the target
  // as Data-Out / come back as Data-In (TCP) or are RDMA-read / -written in place (iSER).
  std::cerr << "iserkit-nbd: copied payload bytes: " << copied_payload_bytes() << "\n";
  if (!stats_file.empty()) std::ofstream(stats_file) << "copied_payload_bytes=" << copied_payload_bytes() << "\n";
  return rc;
}
