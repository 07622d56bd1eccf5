// TcpFramer: RFC 7143 §11 receive framing as a state machine without I/O (tcp_framer.hpp).
#include "iserkit/datamover/tcp_framer.hpp"

#include <algorithm>
#include <cstring>

#include "iserkit/common/crc32c.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::datamover {

std::size_t TcpFramer::want_bytes() const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < want_count_; ++i) n += wants_[i].size();
  return n;
}

void TcpFramer::add_want(std::span<std::byte> span, Role role) noexcept {
  if (span.empty()) return;
  wants_[want_count_] = span;
  roles_[want_count_] = role;
  ++want_count_;
}

void TcpFramer::consumed(std::size_t n) noexcept {
  for (std::size_t i = 0; i < want_count_ && n > 0; ++i) {
    const std::size_t k = std::min(n, wants_[i].size());
    n -= k;
    switch (roles_[i]) {
      case Role::staged: staged_end_ += k; break;
      case Role::piece: have_ += k; break;
      case Role::data: filled_ += k; break;
      case Role::trailer: trailer_have_ += k; break;
      case Role::drain: drain_left_ -= k; break;
    }
  }
  want_count_ = 0;
}

std::size_t TcpFramer::take_staged(std::span<std::byte> out) noexcept {
  const std::size_t n = std::min(out.size(), staged_end_ - staged_begin_);
  if (n == 0) return 0;
  std::memcpy(out.data(), staged_.data() + staged_begin_, n);
  staged_begin_ += n;
  if (staged_begin_ == staged_end_) staged_begin_ = staged_end_ = 0;
  return n;
}

std::optional<Result<PduIn>> TcpFramer::next(DataPlacement* placement) {
  want_count_ = 0;
  while (true) {
    switch (stage_) {
      case Stage::refused: return fail(errc::protocol_error);
      case Stage::bhs: {
        if (staged_end_ - staged_begin_ < iscsi::bhs_size) {
          // The previous PDU's data (valid until now) may have grown scratch up to
          // MaxRecvDataSegmentLength: an idle connection keeps at most one step of it.
          if (scratch_.size() > max_scratch_step) std::vector<std::byte>().swap(scratch_);
          const std::size_t have = staged_end_ - staged_begin_;
          std::memmove(staged_.data(), staged_.data() + staged_begin_, have);
          staged_begin_ = 0;
          staged_end_ = have;
          // Only the rest of this BHS: what follows a BHS may be AHS or payload.
          add_want(std::span(staged_).subspan(have), Role::staged);
          return std::nullopt;
        }
        in_ = PduIn{};
        take_staged(in_.bhs);
        have_ = 0;
        const std::size_t ahs_bytes = std::size_t{iscsi::total_ahs_length_words(in_.bhs)} * 4;
        if (ahs_bytes != 0) {
          in_.ahs.resize(ahs_bytes);
          have_ = take_staged(in_.ahs);
          stage_ = Stage::ahs;
        } else if (header_digest_) {
          have_ = take_staged(digest_);
          stage_ = Stage::header_digest;
        } else {
          if (auto r = after_header(placement)) return r;
        }
        break;
      }
      case Stage::ahs:
        if (have_ < in_.ahs.size()) {
          add_want(std::span(in_.ahs).subspan(have_), Role::piece);
          return std::nullopt;
        }
        if (header_digest_) {
          have_ = take_staged(digest_);
          stage_ = Stage::header_digest;
        } else {
          if (auto r = after_header(placement)) return r;
        }
        break;
      case Stage::header_digest: {
        if (have_ < digest_.size()) {
          add_want(std::span(digest_).subspan(have_), Role::piece);
          return std::nullopt;
        }
        const auto crc = crc32c_final(crc32c_update(crc32c_update(crc32c_init, in_.bhs), in_.ahs));
        // RFC 7143 §7.8: a header digest error means the PDU boundaries can't be trusted.
        if (crc != load_digest(digest_.data())) {
          stage_ = Stage::refused;
          return fail(errc::header_digest_error);
        }
        if (auto r = after_header(placement)) return r;
        break;
      }
      case Stage::segment:
        if (auto r = finish_segment()) return r;
        return std::nullopt;
      case Stage::drain:
        if (drain_left_ > 0) {
          add_want(std::span(scratch_).first(std::min(drain_left_, scratch_.size())), Role::drain);
          return std::nullopt;
        }
        stage_ = Stage::bhs;
        in_.pdu_error = make_error_code(errc::pdu_too_large);
        return std::move(in_);
    }
  }
}

// The header (BHS, AHS, digest) is whole: where does the data segment go?
std::optional<Result<PduIn>> TcpFramer::after_header(DataPlacement* placement) {
  length_ = iscsi::data_segment_length_bytes(in_.bhs);
  if (length_ == 0) {
    stage_ = Stage::bhs;
    return std::move(in_);
  }
  const std::uint32_t pad = iscsi::padding_for(length_);
  trailer_ = pad + (data_digest_ ? 4u : 0u);
  trailer_have_ = 0;
  filled_ = 0;
  if (length_ > max_recv_) {
    if (!drain_oversize_) {
      // Refused before a byte of it is read (login phase: the caller answers and closes). The
      // stream is out of step from here on, so every later next() fails.
      stage_ = Stage::refused;
      in_.pdu_error = make_error_code(errc::pdu_too_large);
      return std::move(in_);
    }
    // Longer than we declared: read and drop it through a bounded buffer so framing survives,
    // and let the caller Reject. The announced length commits no memory.
    std::size_t left = std::size_t{length_} + trailer_;
    std::size_t dropped = std::min(left, staged_end_ - staged_begin_);
    staged_begin_ += dropped;
    if (staged_begin_ == staged_end_) staged_begin_ = staged_end_ = 0;
    drain_left_ = left - dropped;
    scratch_.resize(std::max(scratch_.size(), std::min<std::size_t>(drain_left_, max_scratch_step)));
    stage_ = Stage::drain;
    return std::nullopt;
  }
  dest_ = placement != nullptr ? placement->place(in_.bhs, length_) : std::span<std::byte>{};
  placed_ = dest_.size() == length_;
  if (!placed_) dest_ = {};
  // Bytes of the segment already read ahead (never more than part of a BHS's worth: only before
  // the header completed from the staging area could they be here).
  if (placed_) {
    filled_ = take_staged(dest_);
  } else {
    filled_ = std::min<std::size_t>(length_, staged_end_ - staged_begin_);
    if (scratch_.size() < filled_) scratch_.resize(filled_);
    take_staged(std::span(scratch_).first(filled_));
  }
  if (filled_ == length_) trailer_have_ = take_staged(std::span(tail_).first(trailer_));
  stage_ = Stage::segment;
  return std::nullopt;
}

// The segment stage: complete, or ask for its rest (and the trailer, and a BHS of read-ahead).
std::optional<Result<PduIn>> TcpFramer::finish_segment() {
  if (filled_ == length_ && trailer_have_ == trailer_) {
    std::span<std::byte> data = placed_ ? dest_ : std::span(scratch_).first(length_);
    in_.data = data;
    if (data_digest_) {
      const std::uint32_t pad = iscsi::padding_for(length_);
      auto crc = crc32c_final(crc32c_update(crc32c_update(crc32c_init, data), std::span(tail_).first(pad)));
      if (crc != load_digest(tail_.data() + pad)) in_.pdu_error = make_error_code(errc::data_digest_error);
    }
    stage_ = Stage::bhs;
    return std::move(in_);
  }
  want_segment();
  return std::nullopt;
}

void TcpFramer::want_segment() noexcept {
  if (!placed_) {
    // Scratch grows with the bytes that arrive, never ahead of them by more than one step: a
    // header announcing a long segment commits at most max_scratch_step before its data comes.
    const std::size_t want = std::min<std::size_t>(length_, filled_ + max_scratch_step);
    if (scratch_.size() < want) scratch_.resize(want);
    add_want(std::span(scratch_).subspan(filled_, want - filled_), Role::data);
    if (want < length_) return;  // the trailer and read-ahead come with the last step
  } else {
    add_want(dest_.subspan(filled_), Role::data);
  }
  add_want(std::span(tail_).subspan(trailer_have_, trailer_ - trailer_have_), Role::trailer);
  // The staging area is empty here (the header consumed it): up to one BHS of the next PDU, never
  // more (what follows it may be payload).
  if (staged_end_ == 0) add_want(std::span(staged_), Role::staged);
}

}  // namespace iserkit::datamover
