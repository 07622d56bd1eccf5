// Server side of the NBD fixed-newstyle handshake (see handshake.hpp).
// Spec: NBD proto.md "Newstyle negotiation", "Fixed newstyle negotiation", "Option types",
// "Option reply types", "Size constraints", "TLS support".
#include "nbd_bridge/handshake.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "nbd_bridge/block_status.hpp"

namespace iserkit::nbd {
namespace {

std::error_code to_std(const boost::system::error_code& ec) {
  if (!ec) return {};
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    return make_error_code(errc::connection_closed);
  }
  return {ec.value(), std::system_category()};
}

Awaitable<std::error_code> read_exact(Stream& stream, ByteSpan out) {
  co_return to_std(co_await stream.read_exact(out));
}

Awaitable<std::error_code> write_all(Stream& stream, std::span<const asio::const_buffer> buffers) {
  co_return to_std(co_await stream.write_all(buffers));
}

/// Sends one option reply: header plus `data`.
Awaitable<std::error_code> send_reply(Stream& socket, std::uint32_t option, OptionReply type, ConstByteSpan data) {
  std::array<std::byte, option_reply_header_size> header{};
  encode_option_reply_header(header, {.option = option,
                                      .reply_type = type,
                                      .length_bytes = static_cast<std::uint32_t>(data.size())});
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(header), asio::buffer(data.data(), data.size())};
  co_return co_await write_all(socket, buffers);
}

/// Sends an error reply with a human-readable message (proto.md: error replies MAY carry a string).
Awaitable<std::error_code> send_error(Stream& socket, std::uint32_t option, OptionReply type,
                                      std::string_view message) {
  log::debug("nbd handshake: {}: {}: {}", name_of(static_cast<Option>(option)), name_of(type), message);
  co_return co_await send_reply(socket, option, type, as_bytes(message));
}

bool name_matches(std::string_view requested, const ExportInfo& info) noexcept {
  return requested.empty() || requested == info.name;
}

/// Checks the decoded request of an option that names an export (NBD_OPT_INFO/GO,
/// NBD_OPT_LIST/SET_META_CONTEXT): one that did not decode is answered NBD_REP_ERR_INVALID with
/// `malformed`, one naming an export other than ours NBD_REP_ERR_UNKNOWN (proto.md); either way
/// the option is done and the result is nullopt. Errors: the socket's, from sending the answer.
template <class Request>
Awaitable<Result<std::optional<Request>>> request_for_export(Stream& socket, std::uint32_t option,
                                                             Result<Request> decoded, const ExportInfo& info,
                                                             std::string_view malformed) {
  if (!decoded) {
    if (auto ec = co_await send_error(socket, option, OptionReply::err_invalid, malformed)) co_return fail(ec);
    co_return std::optional<Request>{};
  }
  if (!name_matches(decoded->name, info)) {
    if (auto ec = co_await send_error(socket, option, OptionReply::err_unknown, "no such export")) co_return fail(ec);
    co_return std::optional<Request>{};
  }
  co_return std::optional<Request>{std::move(*decoded)};
}

}  // namespace

std::uint16_t transmission_flags_for(const ExportInfo& info, bool force_read_only, bool structured_replies) noexcept {
  namespace tf = transmission_flag;
  const bool read_only = info.read_only || force_read_only;
  std::uint16_t flags = tf::has_flags;  // proto.md: NBD_FLAG_HAS_FLAGS MUST always be 1
  if (read_only) flags |= tf::read_only;
  if (info.can_flush) flags |= tf::send_flush;
  if (info.can_fua) flags |= tf::send_fua;
  if (info.can_trim && !read_only) flags |= tf::send_trim;
  if (info.can_write_zeroes && !read_only) flags |= tf::send_write_zeroes;
  if (info.can_multi_conn) flags |= tf::can_multi_conn;
  // proto.md: SEND_DF MUST be clear unless structured replies were negotiated.
  if (structured_replies) flags |= tf::send_df;
  return flags;
}

BlockSize block_size_for(const ExportInfo& info, std::uint32_t cap_bytes) noexcept {
  BlockSize sizes{.minimum_bytes = std::max<std::uint32_t>(info.min_block_size_bytes, 1),
                  .preferred_bytes = std::max<std::uint32_t>(info.preferred_block_size_bytes, 512),
                  .maximum_payload_bytes = std::min(info.max_block_size_bytes, cap_bytes)};
  sizes.preferred_bytes = std::max(sizes.preferred_bytes, sizes.minimum_bytes);
  // proto.md "Size constraints": the maximum payload MUST be at least the preferred block size.
  while (sizes.preferred_bytes > sizes.maximum_payload_bytes && sizes.preferred_bytes / 2 >= sizes.minimum_bytes &&
         sizes.preferred_bytes > 512) {
    sizes.preferred_bytes /= 2;
  }
  sizes.maximum_payload_bytes = std::max(sizes.maximum_payload_bytes, sizes.preferred_bytes);
  return sizes;
}

TlsGate tls_gate(std::uint32_t option, TlsMode mode, bool tls_active) noexcept {
  if (mode != TlsMode::require || tls_active) return TlsGate::proceed;
  switch (static_cast<Option>(option)) {
    case Option::starttls:
    case Option::abort:
      return TlsGate::proceed;
    case Option::export_name:
      return TlsGate::disconnect;  // proto.md: it has no error reply; the server MUST disconnect
    default:
      return TlsGate::tls_required;
  }
}

OptionReply starttls_reply(TlsMode mode, bool tls_active, std::size_t data_bytes) noexcept {
  if (mode == TlsMode::off) return OptionReply::err_unsup;
  if (data_bytes != 0 || tls_active) return OptionReply::err_invalid;
  return OptionReply::ack;
}

Awaitable<Result<Negotiated>> run_server_handshake(Stream& socket, const ExportInfo& info,
                                                   const HandshakeOptions& options) {
  std::array<std::byte, greeting_size> greeting{};
  encode_greeting(greeting, handshake_flag::fixed_newstyle | handshake_flag::no_zeroes);
  const std::array<asio::const_buffer, 1> greeting_buffer{asio::buffer(greeting)};
  if (auto ec = co_await write_all(socket, greeting_buffer)) co_return fail(ec);

  std::array<std::byte, client_flags_size> client_flags_bytes{};
  if (auto ec = co_await read_exact(socket, client_flags_bytes)) co_return fail(ec);
  const std::uint32_t client_flags = decode_client_flags(client_flags_bytes);
  // proto.md "Client flags": the server MUST drop the connection on an unknown client flag.
  if (client_flags & ~client_flag::known) {
    log::info("nbd handshake: unknown client flags: flags=0x{:x}", client_flags);
    co_return fail(errc::nbd_protocol_error);
  }
  const bool no_zeroes = (client_flags & client_flag::no_zeroes) != 0;

  bool structured_replies = false;
  bool base_allocation = false;  // NBD_OPT_SET_META_CONTEXT selected base:allocation
  std::vector<std::byte> data;
  for (std::size_t count = 0;; ++count) {
    if (count >= options.max_options) {
      log::info("nbd handshake: too many options: count={}", count);
      co_return fail(errc::nbd_protocol_error);  // proto.md: MAY hard-disconnect a denial of service
    }
    std::array<std::byte, option_header_size> header_bytes{};
    if (auto ec = co_await read_exact(socket, header_bytes)) co_return fail(ec);
    auto header = decode_option_header(header_bytes);
    if (!header) {
      log::info("nbd handshake: bad option magic");
      co_return fail(header.error());
    }
    if (header->length_bytes > options.max_option_bytes) {
      log::info("nbd handshake: option too long: option={} length={}", header->option, header->length_bytes);
      co_return fail(errc::nbd_protocol_error);
    }
    data.resize(header->length_bytes);
    if (auto ec = co_await read_exact(socket, data)) co_return fail(ec);
    const std::uint32_t option = header->option;
    const ConstByteSpan option_data(data);

    switch (tls_gate(option, options.tls_mode, socket.tls_active())) {
      case TlsGate::proceed:
        break;
      case TlsGate::tls_required:
        if (auto ec = co_await send_error(socket, option, OptionReply::err_tls_reqd,
                                          "TLS is required: send NBD_OPT_STARTTLS first"))
          co_return fail(ec);
        continue;
      case TlsGate::disconnect:
        log::info("nbd handshake: NBD_OPT_EXPORT_NAME before TLS, which is required: closing");
        co_return fail(errc::nbd_protocol_error);
    }

    switch (static_cast<Option>(option)) {
      case Option::export_name: {
        const std::string_view name(reinterpret_cast<const char*>(data.data()), data.size());
        // proto.md NBD_OPT_EXPORT_NAME: for an unknown export the server MUST terminate the session.
        if (!name_matches(name, info)) {
          log::info("nbd handshake: NBD_OPT_EXPORT_NAME: unknown export: name={}", log::escaped(name));
          co_return fail(errc::nbd_protocol_error);
        }
        const std::uint16_t flags = transmission_flags_for(info, options.force_read_only, false);
        std::array<std::byte, export_name_reply_size + export_name_zeroes_size> reply{};
        const std::size_t n = encode_export_name_reply(reply, info.size_bytes, flags, no_zeroes);
        const std::array<asio::const_buffer, 1> buffers{asio::buffer(reply.data(), n)};
        if (auto ec = co_await write_all(socket, buffers)) co_return fail(ec);
        // A structured-reply negotiation made earlier still applies; SEND_DF is not advertised here.
        const BlockSize sizes = block_size_for(info, options.max_payload_cap_bytes);
        co_return Negotiated{.params = {.size_bytes = info.size_bytes,
                                        .transmission_flags = flags,
                                        .structured_replies = structured_replies,
                                        .base_allocation = base_allocation && structured_replies,
                                        .min_block_size_bytes = sizes.minimum_bytes,
                                        .max_payload_bytes = sizes.maximum_payload_bytes},
                             .block_size = sizes,
                             .used_export_name = true};
      }

      case Option::abort:
        // proto.md NBD_OPT_ABORT: the server MUST reply with NBD_REP_ACK (and ignore any data).
        // The client may already have closed, so a failed send is not an error worth reporting.
        co_await send_reply(socket, option, OptionReply::ack, {});
        co_return fail(errc::connection_closed);

      case Option::list: {
        // proto.md NBD_OPT_LIST: the server SHOULD reject data with NBD_REP_ERR_INVALID.
        if (!data.empty()) {
          if (auto ec = co_await send_error(socket, option, OptionReply::err_invalid, "NBD_OPT_LIST takes no data"))
            co_return fail(ec);
          break;
        }
        const auto server = encode_rep_server(info.name, info.description);
        if (auto ec = co_await send_reply(socket, option, OptionReply::server, server)) co_return fail(ec);
        if (auto ec = co_await send_reply(socket, option, OptionReply::ack, {})) co_return fail(ec);
        break;
      }

      case Option::structured_reply:
        if (!data.empty()) {
          if (auto ec = co_await send_error(socket, option, OptionReply::err_invalid,
                                            "NBD_OPT_STRUCTURED_REPLY takes no data"))
            co_return fail(ec);
          break;
        }
        // proto.md "Fixed newstyle negotiation": a repeated state-changing option MAY be failed.
        if (structured_replies) {
          if (auto ec = co_await send_error(socket, option, OptionReply::err_invalid,
                                            "structured replies already negotiated"))
            co_return fail(ec);
          break;
        }
        structured_replies = true;
        if (auto ec = co_await send_reply(socket, option, OptionReply::ack, {})) co_return fail(ec);
        break;

      case Option::info:
      case Option::go: {
        auto checked = co_await request_for_export(socket, option, decode_info_request(option_data), info,
                                                   "malformed NBD_OPT_INFO/GO data");
        if (!checked) co_return fail(checked.error());
        if (!*checked) break;
        const auto& request = *checked;
        const std::uint16_t flags = transmission_flags_for(info, options.force_read_only, structured_replies);
        const BlockSize sizes = block_size_for(info, options.max_payload_cap_bytes);
        // proto.md NBD_OPT_INFO: NBD_INFO_EXPORT MUST be sent before NBD_REP_ACK, requested or not.
        const auto export_info = encode_info_export(info.size_bytes, flags);
        if (auto ec = co_await send_reply(socket, option, OptionReply::info, export_info)) co_return fail(ec);
        // Answer the requests we understand; ignore the rest (proto.md: the server MUST ignore
        // information requests it does not understand). Each type is sent at most once.
        bool sent_name = false, sent_description = false, sent_block_size = false;
        for (std::uint16_t wanted : request->info_requests) {
          std::error_code ec;
          switch (static_cast<Info>(wanted)) {
            case Info::name:
              if (sent_name) break;
              sent_name = true;
              ec = co_await send_reply(socket, option, OptionReply::info, encode_info_string(Info::name, info.name));
              break;
            case Info::description:
              if (sent_description || info.description.empty()) break;
              sent_description = true;
              ec = co_await send_reply(socket, option, OptionReply::info,
                                       encode_info_string(Info::description, info.description));
              break;
            case Info::block_size:
              if (sent_block_size) break;
              sent_block_size = true;
              ec = co_await send_reply(socket, option, OptionReply::info, encode_info_block_size(sizes));
              break;
            case Info::export_info:  // already sent above
            default:
              break;
          }
          if (ec) co_return fail(ec);
        }
        if (auto ec = co_await send_reply(socket, option, OptionReply::ack, {})) co_return fail(ec);
        if (static_cast<Option>(option) == Option::go) {
          co_return Negotiated{.params = {.size_bytes = info.size_bytes,
                                          .transmission_flags = flags,
                                          .structured_replies = structured_replies,
                                          .base_allocation = base_allocation,
                                          .min_block_size_bytes = sizes.minimum_bytes,
                                          .max_payload_bytes = sizes.maximum_payload_bytes},
                               .block_size = sizes,
                               .used_export_name = false};
        }
        break;
      }

      case Option::list_meta_context:
      case Option::set_meta_context: {
        // proto.md "Metadata querying": both need structured replies first; SET replaces the
        // selection; unknown namespaces and leaves are ignored; each context found is one
        // NBD_REP_META_CONTEXT, then NBD_REP_ACK.
        const bool listing = static_cast<Option>(option) == Option::list_meta_context;
        if (!structured_replies) {
          if (auto ec = co_await send_error(socket, option, OptionReply::err_invalid,
                                            "metadata contexts need structured replies"))
            co_return fail(ec);
          break;
        }
        auto checked = co_await request_for_export(socket, option, decode_meta_context_request(option_data), info,
                                                   "malformed NBD_OPT_LIST/SET_META_CONTEXT data");
        if (!checked) co_return fail(checked.error());
        if (!*checked) break;
        const auto& request = *checked;
        // LIST with no query lists every context the server has.
        bool selected = listing && request->queries.empty();
        for (std::string_view query : request->queries) {
          selected = selected || query_selects_base_allocation(query, listing);
        }
        if (!listing) base_allocation = selected;
        if (selected) {
          const auto reply = encode_rep_meta_context(listing ? 0 : base_allocation_context_id, base_allocation_context);
          if (auto ec = co_await send_reply(socket, option, OptionReply::meta_context, reply)) co_return fail(ec);
        }
        if (auto ec = co_await send_reply(socket, option, OptionReply::ack, {})) co_return fail(ec);
        break;
      }

      case Option::starttls: {
        const OptionReply answer = starttls_reply(options.tls_mode, socket.tls_active(), data.size());
        if (answer != OptionReply::ack || options.tls == nullptr) {
          const char* why = answer == OptionReply::ack || answer == OptionReply::err_unsup ? "TLS is off"
                            : socket.tls_active()                                       ? "TLS is already on"
                                                                                        : "NBD_OPT_STARTTLS takes no data";
          if (auto ec = co_await send_error(socket, option, answer == OptionReply::ack ? OptionReply::err_unsup : answer,
                                            why))
            co_return fail(ec);
          break;
        }
        if (auto ec = co_await send_reply(socket, option, OptionReply::ack, {})) co_return fail(ec);
        if (auto started = co_await socket.start_tls(*options.tls); !started) co_return fail(started.error());
        // proto.md "TLS support": what was negotiated in plain text does not carry over into TLS.
        structured_replies = false;
        base_allocation = false;
        break;
      }

      case Option::peek_export:
      case Option::extended_headers:
      default:
        // proto.md "Fixed newstyle negotiation": options the server does not implement get
        // NBD_REP_ERR_UNSUP (their data has been read and skipped above).
        if (auto ec = co_await send_error(socket, option, OptionReply::err_unsup, "option not supported"))
          co_return fail(ec);
        break;
    }
  }
}

}  // namespace iserkit::nbd
