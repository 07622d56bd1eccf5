// Server::listen_tcp (nbd_bridge/server): a wildcard listener on port 0 listens on one port in both
// families, even when the port the IPv6 bind picked is already taken in IPv4.
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace iserkit::nbd {
namespace {

bool have_ipv6_loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

bool connects(int family, std::uint16_t port) {
  const int fd = ::socket(family, SOCK_STREAM, 0);
  if (fd < 0) return false;
  int rc;
  if (family == AF_INET) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(port);
    address.sin6_addr = in6addr_loopback;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  ::close(fd);
  return rc == 0;
}

// Leaves `count` IPv4 loopback ports in TIME_WAIT, held by sockets bound without SO_REUSEADDR (the
// listener side closes first). The kernel may still hand such a port to an IPv6-only bind to port 0,
// but an IPv4 wildcard bind to it fails with EADDRINUSE. Returns how many it made.
int leave_ports_in_time_wait(int count) {
  int made = 0;
  for (int i = 0; i < count; ++i) {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    bool ok = listener >= 0 && client >= 0 &&
              ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
              ::listen(listener, 1) == 0 &&
              ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
              ::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    const int accepted = ok ? ::accept(listener, nullptr, nullptr) : -1;
    if (accepted >= 0) {
      ::close(accepted);  // the side that closes first keeps the TIME_WAIT
      ++made;
    }
    if (listener >= 0) ::close(listener);
    if (client >= 0) ::close(client);
  }
  return made;
}

TEST(ServerListen, WildcardPortZeroListensOnOnePortInBothFamilies) {
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback";
  // With ~1500 of ~14000 odd ephemeral ports in IPv4 TIME_WAIT, the port the IPv6 bind picks is taken
  // in IPv4 about one time in ten: a listener that kept such a port would not answer on 127.0.0.1.
  ASSERT_GT(leave_ports_in_time_wait(1500), 1000);
  for (int round = 0; round < 60; ++round) {
    asio::io_context io;
    Server server(io, std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1 << 20}));
    auto port = server.listen_tcp("*", 0);
    ASSERT_TRUE(port) << port.error().message();
    EXPECT_TRUE(connects(AF_INET, *port)) << "round " << round << ": no IPv4 listener on " << *port;
    EXPECT_TRUE(connects(AF_INET6, *port)) << "round " << round << ": no IPv6 listener on " << *port;
  }
}

}  // namespace
}  // namespace iserkit::nbd
