// Fuzz target: iSCSI URLs as users type them (initiator/…/url.hpp; the libiscsi URL form,
// RFC 7143 §4.2.7 names) and the transport policy names of --transport. Input: the text.
// Invariants: a parsed URL has a host, a port 1..65535, a LUN ≤ 16383 only with a target; its
// formatted text parses back to the same URL (without the password: with *** in its place);
// url_problem() gives a reason exactly when parse_url() refuses the text. The same text as a
// "HOST[:PORT]" (common/host_port.hpp): a host with a port formats and parses back to itself.
#include "fuzz_support.hpp"
#include "iserkit/common/host_port.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(raw), size);
  (void)parse_transport_policy(text);
  if (auto hp = parse_host_port(text); hp && hp->port && hp->host.find_first_of("[]") == std::string::npos) {
    auto back = parse_host_port(format_host_port(hp->host, *hp->port));
    FUZZ_CHECK(back.has_value());
    FUZZ_CHECK(back->host == hp->host && back->port == hp->port);
  }
  auto url = parse_url(text);
  FUZZ_CHECK(url_problem(text).empty() == url.has_value());
  if (!url) return 0;
  FUZZ_CHECK(!url->host.empty());
  FUZZ_CHECK(url->port != 0);
  if (url->lun) FUZZ_CHECK(*url->lun <= 16383 && !url->target.empty());
  const std::string formatted = format_url(*url, true);
  auto back = parse_url(formatted);
  FUZZ_CHECK(back.has_value());
  FUZZ_CHECK(*back == *url);
  // Without the password the text parses back to the same URL with the password replaced by ***.
  auto hidden = parse_url(format_url(*url, false));
  FUZZ_CHECK(hidden.has_value());
  Url expected = *url;
  if (!expected.password.empty()) expected.password = "***";
  FUZZ_CHECK(*hidden == expected);
  return 0;
}
