// CRC32C against the RFC 3720 Appendix B.4 vectors in tests/vectors/crc32c.hex.
#include "iserkit/common/crc32c.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace iserkit {
namespace {

std::vector<std::byte> parse_input(const std::string& s) {
  std::vector<std::byte> out;
  if (auto star = s.find('*'); star != std::string::npos) {
    const int n = std::stoi(s.substr(0, star));
    const auto b = static_cast<std::byte>(std::stoi(s.substr(star + 1), nullptr, 16));
    out.assign(static_cast<std::size_t>(n), b);
    return out;
  }
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<std::byte>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(Crc32c, MatchesRfc3720AppendixB4Vectors) {
  std::ifstream in(ISERKIT_VECTORS_DIR "/crc32c.hex");
  ASSERT_TRUE(in) << "missing vectors file";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string input, expected;
    fields >> input >> expected;
    const auto data = parse_input(input);
    EXPECT_EQ(crc32c(data), std::stoul(expected, nullptr, 16)) << "input " << input;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Crc32c, IncrementalEqualsOneShot) {
  std::vector<std::byte> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  auto state = crc32c_update(crc32c_init, std::span(data).first(333));
  state = crc32c_update(state, std::span(data).subspan(333));
  EXPECT_EQ(crc32c_final(state), crc32c(data));
}

TEST(Crc32c, DigestGoesOnTheWireLeastSignificantByteFirst) {
  std::byte wire[4];
  store_digest(wire, 0x8A9136AA);
  EXPECT_EQ(wire[0], std::byte{0xaa});
  EXPECT_EQ(wire[1], std::byte{0x36});
  EXPECT_EQ(wire[2], std::byte{0x91});
  EXPECT_EQ(wire[3], std::byte{0x8a});
  EXPECT_EQ(load_digest(wire), 0x8A9136AAu);
}

}  // namespace
}  // namespace iserkit
