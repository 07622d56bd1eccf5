// iSCSI URL parsing (libiscsi's iscsi://[user[%password]@]host[:port]/target-iqn/lun form).
#include "iserkit/initiator/url.hpp"

#include <charconv>

#include "iserkit/common/errors.hpp"

namespace iserkit::initiator {
namespace {

template <class T>
bool parse_uint(std::string_view s, T& out, std::uint64_t max) {
  if (s.empty()) return false;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > max) return false;
  out = static_cast<T>(v);
  return true;
}

// A host name or IP literal: no brackets, '@', '/', blanks or control characters, which no DNS
// name or address contains and which would not survive format_url() (found by fuzz_url).
bool valid_host(std::string_view host) noexcept {
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '[' || c == ']' || c == '@' || c == '/') return false;
  }
  return !host.empty();
}

// parse_url() with the reason for a refusal in `*why` (when not null): one parser for both.
Result<Url> parse(std::string_view text, std::string* why) {
  const auto bad = [why](const char* reason) {
    if (why != nullptr) *why = reason;
    return fail(errc::invalid_argument);
  };
  Url url;
  constexpr std::string_view iscsi = "iscsi://";
  constexpr std::string_view iser = "iser://";
  if (text.starts_with(iscsi)) {
    text.remove_prefix(iscsi.size());
  } else if (text.starts_with(iser)) {
    text.remove_prefix(iser.size());
    url.transport = datamover::Transport::iser;
  } else {
    return bad("it does not start with iscsi:// or iser://");
  }
  const auto slash = text.find('/');
  std::string_view authority = text.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : text.substr(slash + 1);

  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const auto pct = userinfo.find('%');
    url.user = std::string(userinfo.substr(0, pct));
    if (pct != std::string_view::npos) url.password = std::string(userinfo.substr(pct + 1));
    if (url.user.empty()) return bad("the user name before '@' is empty");
  }
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("the '[' of the IPv6 address is not closed");
    url.host = std::string(authority.substr(1, close - 1));
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("after ']' only :PORT may follow");
      port_text = rest.substr(1);
      if (port_text.empty()) return bad("the port after ':' is empty");
    }
  } else {
    const auto colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("the port after ':' is empty");
    }
  }
  if (url.host.empty()) return bad("the host is empty");
  if (!valid_host(url.host)) return bad("the host holds a blank, '@', '/', a bracket or a control character");
  if (!port_text.empty() && (!parse_uint(port_text, url.port, 65535) || url.port == 0))
    return bad("the port is not a number 1..65535");

  if (!path.empty()) {
    const auto next = path.find('/');
    url.target = std::string(path.substr(0, next));
    if (url.target.empty()) return bad("the target name is empty");
    if (next != std::string_view::npos) {
      std::string_view lun = path.substr(next + 1);
      if (lun.ends_with('/')) lun.remove_suffix(1);
      if (lun.find('/') != std::string_view::npos) return bad("there is more after the LUN");
      std::uint16_t n = 0;
      if (!parse_uint(lun, n, 16383)) return bad("the LUN is not a number 0..16383");
      url.lun = n;
    }
  }
  return url;
}

}  // namespace

Result<Url> parse_url(std::string_view text) { return parse(text, nullptr); }

std::string url_problem(std::string_view text) {
  std::string why;
  if (parse(text, &why)) return {};
  return why;
}

std::string format_url(const Url& url, bool include_password) {
  std::string s = url.transport == datamover::Transport::iser ? "iser://" : "iscsi://";
  if (!url.user.empty()) {
    s += url.user;
    if (!url.password.empty()) s += "%" + (include_password ? url.password : std::string("***"));
    s += "@";
  }
  s += url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (url.port != default_port) s += ":" + std::to_string(url.port);
  if (!url.target.empty()) {
    s += "/" + url.target;
    if (url.lun) s += "/" + std::to_string(*url.lun);
  }
  return s;
}

}  // namespace iserkit::initiator
