// TcpFramer: the receive side of iSCSI/TCP framing (RFC 7143 §11: BHS, AHS, header digest, data
// segment, padding, data digest) without I/O. It says which bytes it wants next (want()), is told
// how many of them arrived (consumed()), and hands out each PDU once it is whole (next()). The
// TCP datamover drives it with non-blocking reads first and Asio's async read when the socket is
// empty; an io_uring loop can drive it with its own receives. Nothing here blocks, suspends or
// allocates per PDU (the AHS, rare, and the scratch buffer, for unplaced segments, excepted).
//
// Zero copy: a data segment the placement places is read straight into the placement's span. The
// only read-ahead is up to one BHS of the next PDU, asked for together with the last bytes of a
// data segment (so a stream of PDUs with data costs one read each); it never holds payload, so no
// payload byte is ever copied out of it. A BHS alone is asked for without read-ahead: what follows
// it may be payload.
//
// Bounds: the scratch buffer (segments nobody placed: text, login, sense, NOP data) grows with the
// bytes that arrive, at most max_scratch_step ahead of them, up to MaxRecvDataSegmentLength; an
// over-long segment is drained through it (or refused unread, set_drain_oversize(false)).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/datamover/datamover.hpp"

namespace iserkit::datamover {

/// Sans-I/O iSCSI/TCP receive framing (see the file comment). One per connection; not thread-safe.
class TcpFramer {
 public:
  /// Scratch grows by at most this many bytes ahead of the bytes that arrive.
  static constexpr std::size_t max_scratch_step = 64 * 1024;

  /// Negotiated digests (RFC 7143 §13.1): CRC32C over header and/or data from the next PDU on.
  void set_digests(bool header, bool data) noexcept {
    header_digest_ = header;
    data_digest_ = data;
  }
  /// The largest data segment accepted, bytes (our MaxRecvDataSegmentLength, RFC 7143 §13.12).
  void set_max_recv_data_segment_length(std::uint32_t bytes) noexcept { max_recv_ = bytes; }
  /// true (default): a longer segment is read and dropped (framing survives, the PDU comes back
  /// with errc::pdu_too_large); false (login phase): refused before a byte of it is read, and
  /// every later next() fails with errc::protocol_error.
  void set_drain_oversize(bool drain) noexcept { drain_oversize_ = drain; }

  /// Advances as far as the bytes already consumed allow. Returns the next whole PDU, or a stream
  /// error (errc::header_digest_error: the PDU boundaries cannot be trusted; errc::protocol_error
  /// after an oversize segment was refused unread) — or nullopt: more bytes are needed, read them
  /// into want() and call consumed(). A PDU's `data` span (in the placement's buffer or the
  /// framer's scratch) stays valid until the next call. `placement` (may be null: scratch) is
  /// asked once per PDU with a data segment, after its BHS and header digest were checked.
  std::optional<Result<PduIn>> next(DataPlacement* placement);

  /// After next() returned nullopt: where the next bytes go, in stream order (1 to 3 spans: the
  /// rest of the piece being read, then possibly its padding/digest and up to one BHS of the next
  /// PDU). Any read may stop anywhere in them.
  [[nodiscard]] std::span<const std::span<std::byte>> want() const noexcept {
    return std::span(wants_).first(want_count_);
  }
  /// The total of want(), bytes.
  [[nodiscard]] std::size_t want_bytes() const noexcept;
  /// `n` bytes (≤ want_bytes()) were read into want()'s spans, in order.
  void consumed(std::size_t n) noexcept;
  /// True when bytes of the next PDU are already here (read ahead): next() may complete a PDU, or
  /// get further, without a read.
  [[nodiscard]] bool has_staged_bytes() const noexcept { return staged_end_ > staged_begin_; }

 private:
  enum class Stage : std::uint8_t { bhs, ahs, header_digest, segment, drain, refused };
  std::size_t take_staged(std::span<std::byte> out) noexcept;
  std::optional<Result<PduIn>> after_header(DataPlacement* placement);
  std::optional<Result<PduIn>> finish_segment();
  void want_segment() noexcept;

  bool header_digest_ = false;
  bool data_digest_ = false;
  std::uint32_t max_recv_ = 8192;
  bool drain_oversize_ = true;

  Stage stage_ = Stage::bhs;
  PduIn in_;
  std::size_t have_ = 0;                  // bytes of the current piece (AHS, digest) already read
  std::array<std::byte, 4> digest_{};     // the header digest
  // The data segment: into the placement's span or scratch_ (then dest_ is re-derived after
  // each resize), its padding + data digest into tail_.
  bool placed_ = false;
  std::uint32_t length_ = 0;              // of the data segment, bytes
  std::size_t filled_ = 0;                // segment bytes read
  std::array<std::byte, 8> tail_{};
  std::size_t trailer_ = 0;               // padding + data digest bytes
  std::size_t trailer_have_ = 0;
  std::size_t drain_left_ = 0;            // an oversize segment's bytes (and trailer) still to drop
  std::vector<std::byte> scratch_;
  std::span<std::byte> dest_;

  // Bytes of the next PDU's BHS read ahead: staged_[staged_begin_, staged_end_).
  std::array<std::byte, iscsi::bhs_size> staged_{};
  std::size_t staged_begin_ = 0;
  std::size_t staged_end_ = 0;

  // want(): what the last next() asked for, and which of those spans is which.
  enum class Role : std::uint8_t { staged, piece, data, trailer, drain };
  void add_want(std::span<std::byte> span, Role role) noexcept;
  std::array<std::span<std::byte>, 3> wants_{};
  std::array<Role, 3> roles_{};
  std::size_t want_count_ = 0;
};

}  // namespace iserkit::datamover
