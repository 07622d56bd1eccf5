// Fuzz target: the iSER header of control-type PDUs, Hello / HelloReply and the RDMA CM private
// data (common/…/iser/header.hpp; RFC 7145 §9.2–§9.4, Linux iser_cm_hdr). Input: a received
// message (the first 28 bytes are the header).
// Invariants: each decoder that accepts its input gives a value that encodes and decodes back
// equal; the opcode seen by peek_opcode matches the decoder that accepts.
#include <array>

#include "fuzz_support.hpp"
#include "iserkit/iser/header.hpp"

using namespace iserkit;
using namespace iserkit::iser;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const ConstByteSpan data(reinterpret_cast<const std::byte*>(raw), size);
  const auto opcode = peek_opcode(data);
  std::array<std::byte, header_size> out{};

  if (auto h = decode_header(data)) {
    FUZZ_CHECK(opcode.has_value() && *opcode == Opcode::iscsi_control);
    FUZZ_CHECK(size >= header_size);
    if (!h->write_valid) FUZZ_CHECK(h->write_stag == 0 && h->write_base_offset == 0);
    if (!h->read_valid) FUZZ_CHECK(h->read_stag == 0 && h->read_base_offset == 0);
    encode_header(*h, out);
    auto back = decode_header(out);
    FUZZ_CHECK(back.has_value() && *back == *h);
  }
  if (auto hello = decode_hello(data)) {
    FUZZ_CHECK(opcode.has_value() && *opcode == Opcode::hello);
    FUZZ_CHECK(hello->min_version <= hello->max_version && hello->max_version <= 15);
    encode_hello(*hello, out);
    auto back = decode_hello(out);
    FUZZ_CHECK(back.has_value() && *back == *hello);
  }
  if (auto reply = decode_hello_reply(data)) {
    FUZZ_CHECK(opcode.has_value() && *opcode == Opcode::hello_reply);
    encode_hello_reply(*reply, out);
    auto back = decode_hello_reply(out);
    FUZZ_CHECK(back.has_value() && *back == *reply);
  }
  if (auto request = decode_cm_request(data)) {
    FUZZ_CHECK(size >= cm_private_data_size);
    FUZZ_CHECK(decode_cm_request(encode_cm_request(*request)) == request);
  }
  if (auto reply = decode_cm_reply(data)) {
    FUZZ_CHECK(size >= cm_private_data_size);
    FUZZ_CHECK(decode_cm_reply(encode_cm_reply(*reply)) == reply);
  }
  return 0;
}
