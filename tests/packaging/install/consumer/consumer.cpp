// A program outside the iserkit tree that uses the installed initiator library: opens the LUN
// named by argv[1], writes 1 MiB of a pattern at 1 MiB, reads it back and compares. Built by
// install_consumer_test.sh twice, through find_package(iserkit) and through pkg-config.
#include <cstddef>
#include <cstdio>
#include <vector>

#include "iserkit/initiator/client.hpp"
#include "iserkit/initiator/url.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer iscsi://HOST:PORT/IQN/LUN\n");
    return 2;
  }
  auto url = iserkit::initiator::parse_url(argv[1]);
  if (!url) {
    std::fprintf(stderr, "bad URL: %s\n", url.error().message().c_str());
    return 2;
  }
  auto client = iserkit::initiator::BlockingClient::open(*url);
  if (!client) {
    std::fprintf(stderr, "open: %s\n", client.error().message().c_str());
    return 1;
  }
  auto capacity = (*client)->read_capacity();
  if (!capacity) {
    std::fprintf(stderr, "read capacity: %s\n", capacity.error().message().c_str());
    return 1;
  }
  constexpr std::size_t length = 1 << 20;
  std::vector<std::byte> out(length), in(length);
  for (std::size_t i = 0; i < length; ++i) out[i] = static_cast<std::byte>((i * 131 + i / 4096) & 0xff);
  if (auto w = (*client)->write_bytes(length, out); !w) {
    std::fprintf(stderr, "write: %s\n", w.error().message().c_str());
    return 1;
  }
  if (auto r = (*client)->read_bytes(length, in); !r) {
    std::fprintf(stderr, "read: %s\n", r.error().message().c_str());
    return 1;
  }
  if (in != out) {
    std::fprintf(stderr, "read back differs from what was written\n");
    return 1;
  }
  std::printf("consumer: %llu blocks of %u bytes; 1 MiB written and read back equal\n",
              static_cast<unsigned long long>(capacity->blocks), capacity->block_size_bytes);
  return 0;
}
