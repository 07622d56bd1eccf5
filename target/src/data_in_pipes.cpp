// DataInPipes (see data_in_pipes.hpp).
#include "data_in_pipes.hpp"

#include <fcntl.h>

#include <algorithm>

namespace iserkit::target {
namespace {
constexpr std::size_t page_bytes = 4096;
}

DataInPipes::~DataInPipes() {
  for (auto& p : spare_) p.close();
  for (auto& p : lent_) p.close();
  for (auto& a : active_) a.pipe.close();
}

int DataInPipes::take(std::uint64_t offset_bytes, std::size_t length_bytes) {
  if (length_bytes < min_bytes) return -1;
  // Each page the range touches is one slot of the pipe (a splice from the page cache puts page
  // references in it, partial ones at the ends).
  const std::size_t pages = (offset_bytes % page_bytes + length_bytes + page_bytes - 1) / page_bytes;
  SplicePipe p;
  if (!spare_.empty()) {
    p = spare_.back();
    if (pages * page_bytes > p.capacity) return -1;
    spare_.pop_back();
  } else {
    if (created_ >= max_pipes) return -1;
    auto opened = open_splice_pipe(pipe_bytes, O_NONBLOCK);
    if (!opened) return -1;
    p = *opened;
    ++created_;
    if (pages * page_bytes > p.capacity) {
      give_back(p);
      return -1;
    }
  }
  lent_.push_back(p);
  return p.write_fd;
}

void DataInPipes::started(int write_fd, iscsi::Itt itt, bool spliced, std::size_t length_bytes) {
  const auto it = std::find_if(lent_.begin(), lent_.end(), [&](const SplicePipe& p) { return p.write_fd == write_fd; });
  if (it == lent_.end()) return;
  const SplicePipe p = *it;
  lent_.erase(it);
  if (!spliced) {
    give_back(p);
    return;
  }
  end(itt);  // an older pipe of this ITT (its task never reached end()) goes first
  active_.push_back(Active{.itt = itt, .pipe = p, .bytes = length_bytes, .taken = 0});
}

bool DataInPipes::mark(std::span<datamover::PduOut> pdus) {
  if (active_.empty()) return true;
  for (auto& pdu : pdus) {
    if (iscsi::raw_opcode(pdu.bhs) != static_cast<std::uint8_t>(iscsi::Opcode::data_in) || pdu.data.empty()) continue;
    const iscsi::Itt itt = iscsi::itt_of(pdu.bhs);
    const auto it = std::find_if(active_.begin(), active_.end(), [&](const Active& a) { return a.itt == itt; });
    if (it == active_.end()) continue;
    // RFC 7143 §11.7.5: Buffer Offset, bytes 40-43.
    const std::uint32_t offset = load_be32(&pdu.bhs[40]);
    if (offset != it->taken || pdu.data.size() > it->bytes - it->taken) return false;
    pdu.splice_from = it->pipe.read_fd;
    it->taken += pdu.data.size();
    marked_bytes_ += pdu.data.size();
  }
  return true;
}

void DataInPipes::end(iscsi::Itt itt) {
  const auto it = std::find_if(active_.begin(), active_.end(), [&](const Active& a) { return a.itt == itt; });
  if (it == active_.end()) return;
  const SplicePipe p = it->pipe;
  active_.erase(it);
  give_back(p);
}

void DataInPipes::give_back(SplicePipe p) noexcept {
  if (p.empty()) {
    spare_.push_back(p);
    return;
  }
  p.close();
  --created_;
}

}  // namespace iserkit::target
