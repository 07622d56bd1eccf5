// Typed SCSI commands on one LUN (SBC-4 §5: READ/WRITE 10/16, SYNCHRONIZE CACHE 10/16, UNMAP,
// WRITE SAME 16, READ CAPACITY 10/16; SPC-5 §6.6 INQUIRY, §7.7 VPD, §6.33 REPORT LUNS, §6.47 TEST
// UNIT READY; SBC-4 §6.6.4/§6.6.5 block limits and provisioning).
#include <algorithm>
#include <array>
#include <cstring>

#include "io_plan.hpp"
#include "retry_policy.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/lun.hpp"

namespace iserkit::initiator {
namespace {

bool is_illegal_request(const scsi::ScsiResult& r) {
  return r.status == scsi::Status::check_condition && r.sense && r.sense->key == scsi::SenseKey::illegal_request;
}
bool is_unit_attention(const scsi::ScsiResult& r) {
  return r.status == scsi::Status::check_condition && r.sense && r.sense->key == scsi::SenseKey::unit_attention;
}

// Data-in length actually received: EDTL minus an underflow residual.
std::size_t received(const scsi::ScsiResult& r, std::size_t edtl) {
  if (r.residual_overflow || r.residual_bytes == 0) return edtl;
  return r.residual_bytes >= edtl ? 0 : edtl - r.residual_bytes;
}

// What `parse` makes of a VPD page vpd_page() read, or the error of reading it (a plain function:
// the getters below stay one coroutine each).
template <class Parse>
auto parsed_vpd_page(const Result<std::vector<std::byte>>& page, Parse parse) -> decltype(parse(*page)) {
  if (!page) return fail(page.error());
  return parse(*page);
}

// Sends `req`, again as RetryPolicy says for UNIT ATTENTION, BUSY and TASK SET FULL.
Awaitable<Result<scsi::ScsiResult>> execute_with_retries(CommandChannel& session, const CommandRequest& req) {
  RetryPolicy policy;
  while (true) {
    auto r = co_await session.execute(req);
    if (!r) co_return r;
    const auto delay = policy.next(*r);
    if (!delay) co_return r;
    log::debug("command: retrying: opcode=0x{:02x} status=0x{:02x} after {} ms", static_cast<unsigned>(req.cdb.bytes[0]),
               static_cast<unsigned>(r->status), delay->count());
    if (delay->count() > 0) {
      asio::steady_timer timer(session.executor());
      timer.expires_after(*delay);
      boost::system::error_code ec;
      co_await timer.async_wait(use_awaitable_ec(ec));
    }
  }
}

}  // namespace

Awaitable<Result<scsi::ScsiResult>> LunHandle::run(const scsi::Cdb& cdb, std::span<std::byte> in,
                                                   std::span<const std::byte> out) {
  CommandRequest req{.lun = info_.lun, .cdb = cdb, .data_in = in, .data_out = out};
  // The one staging path for control data (INQUIRY/VPD, READ CAPACITY, UNMAP lists, the WRITE SAME
  // block): it is not payload, so unless the caller's span already lies in the session's pool it
  // is staged in a buffer leased from that pool — registered memory on iSER, heap on TCP — the
  // same way on every transport. These are uncounted control-byte copies; payload (read()/write())
  // never comes here.
  BufferPool& pool = channel_->buffer_pool();
  PooledBuffer staging;
  if (!in.empty() && !pool.registration(in)) {
    staging = pool.allocate(in.size());
    req.data_in = staging.bytes().first(in.size());
  } else if (!out.empty() && !pool.registration(out)) {
    staging = pool.allocate(out.size());
    std::memcpy(staging.data(), out.data(), out.size());
    req.data_out = staging.bytes().first(out.size());
  }
  auto r = co_await execute_with_retries(*channel_, req);
  if (r && staging && !in.empty()) std::memcpy(in.data(), staging.data(), received(*r, in.size()));
  co_return r;
}

Awaitable<Result<LunHandle>> LunHandle::open(std::shared_ptr<CommandChannel> channel, scsi::Lun lun) {
  LunHandle h(std::move(channel), lun);
  // A fresh I_T nexus usually reports POWER ON/RESET first (SAM-5 §5.14): retry through it.
  Result<void> ready;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = co_await h.run(scsi::test_unit_ready(), {});
    if (!r) co_return fail(r.error());
    if (is_unit_attention(*r)) continue;
    ready = check(*r);
    break;
  }
  if (!ready) co_return fail(ready.error());
  auto inq = co_await h.inquiry();
  if (!inq) co_return fail(inq.error());
  if (inq->type != scsi::PeripheralType::direct_access_block || inq->qualifier != scsi::PeripheralQualifier::connected)
    co_return fail(errc::not_supported);
  auto cap = co_await h.read_capacity();
  if (!cap) co_return fail(cap.error());
  h.info_.capacity = *cap;
  if (auto pages = co_await h.supported_vpd_pages()) {
    const auto has = [&](std::uint8_t p) { return std::find(pages->begin(), pages->end(), p) != pages->end(); };
    if (has(scsi::vpd::block_limits)) {
      if (auto bl = co_await h.block_limits()) h.info_.block_limits = *bl;
    }
    if (has(scsi::vpd::logical_block_provisioning)) {
      if (auto lbp = co_await h.logical_block_provisioning()) h.info_.provisioning = *lbp;
    }
  }
  // Whether WRITE may carry FUA: LIO rejects FUA on a LUN without DPOFUA (write-through
  // emulation off), so front ends advertise FUA only when this says so. Optional: a unit that
  // rejects MODE SENSE still opens.
  if (auto mh = co_await h.mode_parameter_header()) h.info_.mode_header = *mh;
  h.info_.max_transfer_blocks = max_transfer_blocks(TransferLimitInputs{
      .block_limits = h.info_.block_limits,
      .block_size_bytes = h.info_.capacity.block_size_bytes,
      .transport_max_bytes = h.channel_->max_transfer_bytes(),
      .unstated_max_bytes = h.channel_->unstated_max_transfer_bytes(),
  });
  co_return h;
}

namespace {

// One READ/WRITE of a transfer: `req` carries the CDB and the chunk's slice of the caller's buffer.
Awaitable<Result<void>> transfer_chunk(std::shared_ptr<CommandChannel> session, CommandRequest req, bool write,
                                       std::uint64_t lba, std::uint32_t blocks) {
  auto r = co_await execute_with_retries(*session, req);
  co_return LunHandle::finish_transfer(r, write, lba, blocks);
}

}  // namespace

Awaitable<Result<void>> LunHandle::transfer(std::uint64_t lba, std::uint32_t blocks, bool write, bool fua,
                                            std::span<std::byte> in, std::span<const std::byte> out,
                                            std::chrono::milliseconds timeout) {
  const std::uint32_t bs = info_.capacity.block_size_bytes;
  const std::size_t size = write ? out.size() : in.size();
  if (bs == 0 || size != std::uint64_t{blocks} * bs) co_return fail(errc::invalid_argument);
  if (lba > info_.capacity.blocks || blocks > info_.capacity.blocks - lba) co_return fail(errc::invalid_argument);
  const std::uint32_t step = info_.max_transfer_blocks;
  auto request = [&](std::uint32_t done, std::uint32_t n) {
    const std::size_t off = std::size_t{done} * bs;
    const std::size_t len = std::size_t{n} * bs;
    CommandRequest req{.lun = info_.lun,
                       .cdb = read_write_cdb(write, lba + done, n, fua, info_.capacity.blocks),
                       .timeout = timeout};
    if (write) {
      req.data_out = out.subspan(off, len);
    } else {
      req.data_in = in.subspan(off, len);
    }
    return req;
  };
  if (blocks <= step) co_return co_await transfer_chunk(channel_, request(0, blocks), write, lba, blocks);

  // Larger than one command carries: every chunk is issued at once, as its own coroutine (the
  // session's CmdSN window and command limit pace them), and this waits for ALL of them before
  // returning, failed or not, so no command still refers to the caller's buffer afterwards. The
  // first error is the one reported; other chunks may have completed (as with any failed write).
  struct Join {
    std::size_t pending = 0;
    std::error_code error;
    Completion done;
  } join;
  auto executor = co_await asio::this_coro::executor;
  for (std::uint32_t done = 0; done < blocks;) {
    const std::uint32_t n = std::min(step, blocks - done);
    ++join.pending;
    asio::co_spawn(executor, transfer_chunk(channel_, request(done, n), write, lba + done, n),
                   [&join](std::exception_ptr e, Result<void> r) {
                     if (!join.error) {
                       if (e) join.error = std::make_error_code(std::errc::not_enough_memory);
                       else if (!r) join.error = r.error();
                     }
                     if (--join.pending == 0) join.done.complete();
                   });
    done += n;
  }
  co_await join.done.wait();
  if (join.error) co_return fail(join.error);
  co_return Result<void>{};
}

Result<void> LunHandle::finish_transfer(const Result<scsi::ScsiResult>& r, bool write, std::uint64_t lba,
                                        std::uint32_t blocks) {
  if (!r) return fail(r.error());
  if (auto ok = check(*r); !ok) return fail(ok.error());
  // SBC-4: GOOD status with fewer bytes than asked would leave stale data in the buffer.
  if (r->residual_bytes != 0 && !r->residual_overflow) {
    log::warn("{}: short transfer: lba={} blocks={} residual={}", write ? "write" : "read", lba, blocks,
              r->residual_bytes);
    return fail(errc::protocol_error);
  }
  return {};
}

bool LunHandle::wants_retry(const Result<scsi::ScsiResult>& r) noexcept {
  if (!r) return false;
  RetryPolicy policy;
  return policy.next(*r).has_value();
}

bool LunHandle::start_transfer(std::uint64_t lba, std::uint32_t blocks, bool write, bool fua, std::span<std::byte> in,
                               std::span<const std::byte> out, CommandCallback& done) {
  const std::uint32_t bs = info_.capacity.block_size_bytes;
  const std::size_t size = write ? out.size() : in.size();
  if (blocks == 0 || blocks > info_.max_transfer_blocks || bs == 0 || size != std::uint64_t{blocks} * bs) return false;
  if (lba > info_.capacity.blocks || blocks > info_.capacity.blocks - lba) return false;
  CommandRequest req{.lun = info_.lun, .cdb = read_write_cdb(write, lba, blocks, fua, info_.capacity.blocks)};
  if (write) {
    req.data_out = out;
  } else {
    req.data_in = in;
  }
  return static_cast<bool>(channel_->start(req, done));
}

Awaitable<Result<void>> LunHandle::read(const ReadOptions& o, std::span<std::byte> buffer) {
  return transfer(o.lba, o.blocks, false, o.fua, buffer, {}, o.timeout);
}

Awaitable<Result<void>> LunHandle::write(const WriteOptions& o, std::span<const std::byte> buffer) {
  return transfer(o.lba, o.blocks, true, o.fua, {}, buffer, o.timeout);
}

Awaitable<Result<void>> LunHandle::read_bytes(std::uint64_t offset_bytes, std::span<std::byte> buffer) {
  const std::uint32_t bs = info_.capacity.block_size_bytes;
  if (offset_bytes > info_.capacity.size_bytes() || buffer.size() > info_.capacity.size_bytes() - offset_bytes)
    co_return fail(errc::invalid_argument);
  const BytePlan p = plan_bytes(offset_bytes, buffer.size(), bs);
  std::size_t pos = 0;
  if (p.head_bytes != 0) {
    auto bounce = channel_->buffer_pool().allocate(bs);
    if (auto r = co_await read({.lba = p.first_lba, .blocks = 1}, bounce.bytes()); !r) co_return r;
    copy_payload(buffer.data(), bounce.data() + p.head_offset, p.head_bytes);  // counted bounce copy
    pos += p.head_bytes;
  }
  if (p.middle_blocks != 0) {
    const std::size_t len = p.middle_blocks * bs;
    if (auto r = co_await read({.lba = p.middle_lba, .blocks = static_cast<std::uint32_t>(p.middle_blocks)},
                               buffer.subspan(pos, len));
        !r)
      co_return r;
    pos += len;
  }
  if (p.tail_bytes != 0) {
    auto bounce = channel_->buffer_pool().allocate(bs);
    if (auto r = co_await read({.lba = p.tail_lba, .blocks = 1}, bounce.bytes()); !r) co_return r;
    copy_payload(buffer.data() + pos, bounce.data(), p.tail_bytes);
  }
  co_return Result<void>{};
}

Awaitable<Result<void>> LunHandle::write_bytes(std::uint64_t offset_bytes, std::span<const std::byte> data,
                                               ByteWriteOptions options) {
  const std::uint32_t bs = info_.capacity.block_size_bytes;
  if (offset_bytes > info_.capacity.size_bytes() || data.size() > info_.capacity.size_bytes() - offset_bytes)
    co_return fail(errc::invalid_argument);
  const BytePlan p = plan_bytes(offset_bytes, data.size(), bs);
  std::size_t pos = 0;
  if (p.head_bytes != 0) {  // read-modify-write of the head block
    auto bounce = channel_->buffer_pool().allocate(bs);
    if (auto r = co_await read({.lba = p.first_lba, .blocks = 1}, bounce.bytes()); !r) co_return r;
    copy_payload(bounce.data() + p.head_offset, data.data(), p.head_bytes);
    if (auto r = co_await write({.lba = p.first_lba, .blocks = 1, .fua = options.fua}, bounce.bytes()); !r)
      co_return r;
    pos += p.head_bytes;
  }
  if (p.middle_blocks != 0) {
    const std::size_t len = p.middle_blocks * bs;
    if (auto r = co_await write(
            {.lba = p.middle_lba, .blocks = static_cast<std::uint32_t>(p.middle_blocks), .fua = options.fua},
            data.subspan(pos, len));
        !r)
      co_return r;
    pos += len;
  }
  if (p.tail_bytes != 0) {  // read-modify-write of the tail block
    auto bounce = channel_->buffer_pool().allocate(bs);
    if (auto r = co_await read({.lba = p.tail_lba, .blocks = 1}, bounce.bytes()); !r) co_return r;
    copy_payload(bounce.data(), data.data() + pos, p.tail_bytes);
    if (auto r = co_await write({.lba = p.tail_lba, .blocks = 1, .fua = options.fua}, bounce.bytes()); !r) co_return r;
  }
  co_return Result<void>{};
}

Awaitable<Result<void>> LunHandle::synchronize_cache(FlushOptions o) {
  scsi::Cdb cdb;
  if (auto c10 = scsi::synchronize_cache10({.lba = o.lba, .blocks = o.blocks}); c10 && o.blocks <= 0xffff) {
    cdb = *c10;
  } else {
    cdb = scsi::synchronize_cache16({.lba = o.lba, .blocks = o.blocks});
  }
  auto r = co_await run(cdb, {});
  if (!r) co_return fail(r.error());
  co_return check(*r);
}

Awaitable<Result<void>> LunHandle::unmap(std::span<const BlockRange> ranges) {
  if (!info_.provisioning || !info_.provisioning->lbpu) co_return fail(errc::not_supported);
  const auto& bl = info_.block_limits;
  const std::uint64_t max_lbas =
      (bl && bl->maximum_unmap_lba_count != 0 && bl->maximum_unmap_lba_count != 0xffffffff) ? bl->maximum_unmap_lba_count
                                                                                             : 0xffffffffull;
  std::size_t max_desc = (bl && bl->maximum_unmap_block_descriptor_count != 0 &&
                          bl->maximum_unmap_block_descriptor_count != 0xffffffff)
                             ? bl->maximum_unmap_block_descriptor_count
                             : 256;
  max_desc = std::min<std::size_t>(max_desc, 4095);
  std::vector<scsi::UnmapDescriptor> batch;
  std::uint64_t batch_lbas = 0;
  auto flush = [&]() -> Awaitable<Result<void>> {
    if (batch.empty()) co_return Result<void>{};
    auto list = scsi::unmap_parameter_list(batch);
    auto cdb = scsi::unmap({.parameter_list_length_bytes = static_cast<std::uint16_t>(list.size())});
    batch.clear();
    batch_lbas = 0;
    auto r = co_await run(cdb, {}, list);
    if (!r) co_return fail(r.error());
    co_return check(*r);
  };
  for (const BlockRange& range : ranges) {
    if (range.lba > info_.capacity.blocks || range.blocks > info_.capacity.blocks - range.lba)
      co_return fail(errc::invalid_argument);
    std::uint64_t lba = range.lba;
    std::uint64_t left = range.blocks;
    while (left > 0) {
      // SBC-4 §5.32.2: each descriptor ≤ 2^32 - 1 blocks; the command within the unit's limits.
      if (batch.size() == max_desc || batch_lbas == max_lbas) {
        if (auto r = co_await flush(); !r) co_return r;
      }
      const std::uint64_t n = std::min({left, max_lbas - batch_lbas, std::uint64_t{0xffffffff}});
      batch.push_back({.lba = lba, .blocks = static_cast<std::uint32_t>(n)});
      batch_lbas += n;
      lba += n;
      left -= n;
    }
  }
  co_return co_await flush();
}

Awaitable<Result<void>> LunHandle::write_zeroes(WriteZeroesOptions o) {
  const std::uint32_t bs = info_.capacity.block_size_bytes;
  if (o.lba > info_.capacity.blocks || o.blocks > info_.capacity.blocks - o.lba) co_return fail(errc::invalid_argument);
  std::uint64_t max_blocks = std::uint64_t{info_.max_transfer_blocks} * 64;
  if (info_.block_limits && info_.block_limits->maximum_write_same_length != 0)
    max_blocks = info_.block_limits->maximum_write_same_length;
  max_blocks = std::min<std::uint64_t>(max_blocks, 0xffffffff);
  auto zero = channel_->buffer_pool().allocate(bs);
  std::memset(zero.data(), 0, bs);
  std::uint64_t lba = o.lba;
  std::uint64_t left = o.blocks;
  while (left > 0) {
    const auto n = static_cast<std::uint32_t>(std::min(left, max_blocks));
    auto cdb = scsi::write_same16({.lba = lba, .blocks = n, .unmap = o.may_unmap});
    auto r = co_await run(cdb, {}, zero.bytes());
    if (!r) co_return fail(r.error());
    if (auto ok = check(*r); !ok) co_return ok;
    lba += n;
    left -= n;
  }
  co_return Result<void>{};
}

Awaitable<Result<scsi::StandardInquiry>> LunHandle::inquiry() {
  std::array<std::byte, 255> buf{};
  auto r = co_await run(scsi::inquiry({.allocation_length = buf.size()}), buf);
  if (!r) co_return fail(r.error());
  if (auto ok = check(*r); !ok) co_return fail(ok.error());
  co_return scsi::parse_standard_inquiry(std::span(buf).first(received(*r, buf.size())));
}

Awaitable<Result<std::vector<std::byte>>> LunHandle::vpd_page(std::uint8_t page_code) {
  std::vector<std::byte> buf(1024);
  auto r = co_await run(scsi::inquiry({.evpd = true, .page_code = page_code, .allocation_length = 1024}), buf);
  if (!r) co_return fail(r.error());
  if (auto ok = check(*r); !ok) co_return fail(ok.error());
  buf.resize(received(*r, buf.size()));
  co_return buf;
}

Awaitable<Result<scsi::ThirdPartyCopyLimits>> LunHandle::third_party_copy_limits() {
  co_return parsed_vpd_page(co_await vpd_page(scsi::vpd::third_party_copy), scsi::parse_third_party_copy_vpd);
}

Awaitable<Result<void>> LunHandle::extended_copy(std::span<const std::byte> parameter_list,
                                                 std::chrono::milliseconds timeout) {
  // The list is control data (about 100 bytes): staged in a pooled buffer like run() stages.
  BufferPool& pool = channel_->buffer_pool();
  PooledBuffer staging = pool.allocate(parameter_list.size());
  std::memcpy(staging.data(), parameter_list.data(), parameter_list.size());
  const CommandRequest req{.lun = info_.lun,
                           .cdb = scsi::extended_copy_cdb(static_cast<std::uint32_t>(parameter_list.size())),
                           .data_in = {},
                           .data_out = staging.bytes().first(parameter_list.size()),
                           .attribute = iscsi::TaskAttribute::simple,
                           .timeout = timeout};
  auto r = co_await execute_with_retries(*channel_, req);
  if (!r) co_return fail(r.error());
  co_return check(*r);
}

Awaitable<Result<std::vector<std::uint8_t>>> LunHandle::supported_vpd_pages() {
  co_return parsed_vpd_page(co_await vpd_page(scsi::vpd::supported_pages), scsi::parse_supported_vpd_pages);
}

Awaitable<Result<std::string>> LunHandle::unit_serial_number() {
  co_return parsed_vpd_page(co_await vpd_page(scsi::vpd::unit_serial_number), scsi::parse_unit_serial_number);
}

Awaitable<Result<std::vector<scsi::Designator>>> LunHandle::device_identification() {
  co_return parsed_vpd_page(co_await vpd_page(scsi::vpd::device_identification), scsi::parse_device_identification);
}

Awaitable<Result<scsi::BlockLimits>> LunHandle::block_limits() {
  auto page = co_await vpd_page(scsi::vpd::block_limits);
  if (!page) co_return fail(page.error());
  // Some targets return a short 0xb0 page; pad it to the full size (missing fields = 0, "no limit").
  if (page->size() >= 4 && page->size() < scsi::block_limits_page_size_bytes)
    page->resize(scsi::block_limits_page_size_bytes);
  co_return scsi::parse_block_limits(*page);
}

Awaitable<Result<scsi::LogicalBlockProvisioning>> LunHandle::logical_block_provisioning() {
  co_return parsed_vpd_page(co_await vpd_page(scsi::vpd::logical_block_provisioning), scsi::parse_logical_block_provisioning);
}

Awaitable<Result<scsi::ModeParameterHeader>> LunHandle::mode_parameter_header() {
  // The Caching page (0x08) keeps the answer short; every direct-access unit has it. 64 bytes hold
  // either header and the 20-byte page.
  std::array<std::byte, 64> data{};
  const scsi::ModeSenseOptions options{.page_code = 0x08, .dbd = true, .allocation_length = data.size()};
  auto r = co_await run(scsi::mode_sense10(options), data);
  bool ten = true;
  if (r && is_illegal_request(*r)) {
    // Some older units implement only MODE SENSE (6).
    auto cdb6 = scsi::mode_sense6(options);
    if (!cdb6) co_return fail(cdb6.error());
    r = co_await run(*cdb6, data);
    ten = false;
  }
  if (!r) co_return fail(r.error());
  if (auto ok = check(*r); !ok) co_return fail(ok.error());
  co_return scsi::parse_mode_parameter_header(std::span(data).first(received(*r, data.size())), ten);
}

Awaitable<Result<Capacity>> LunHandle::read_capacity() {
  std::array<std::byte, scsi::read_capacity16_size_bytes> buf16{};
  auto r = co_await run(scsi::read_capacity16(), buf16);
  if (!r) co_return fail(r.error());
  if (r->status == scsi::Status::good) {
    auto d = scsi::parse_read_capacity16(std::span(buf16).first(received(*r, buf16.size())));
    if (!d) co_return fail(d.error());
    co_return Capacity{.blocks = d->last_lba + 1, .block_size_bytes = d->block_length_bytes, .thin = d->lbpme,
                       .unmapped_reads_zero = d->lbprz};
  }
  if (!is_illegal_request(*r)) co_return fail(make_scsi_error(*r));
  // SBC-4 §5.20: READ CAPACITY (10) for units that do not implement (16).
  std::array<std::byte, scsi::read_capacity10_size_bytes> buf10{};
  auto r10 = co_await run(scsi::read_capacity10(), buf10);
  if (!r10) co_return fail(r10.error());
  if (auto ok = check(*r10); !ok) co_return fail(ok.error());
  auto d = scsi::parse_read_capacity10(std::span(buf10).first(received(*r10, buf10.size())));
  if (!d) co_return fail(d.error());
  co_return Capacity{.blocks = std::uint64_t{d->last_lba} + 1, .block_size_bytes = d->block_length_bytes};
}

Awaitable<Result<std::vector<scsi::LbaStatusDescriptor>>> LunHandle::get_lba_status(std::uint64_t lba,
                                                                                   std::uint32_t max_descriptors) {
  // SBC-4 §5.8: GET LBA STATUS exists with logical block provisioning management only.
  if (!info_.capacity.thin) co_return fail(errc::not_supported);
  if (lba >= info_.capacity.blocks) co_return fail(errc::invalid_argument);
  const std::size_t wanted = std::clamp<std::size_t>(max_descriptors, 1, 4096);
  std::vector<std::byte> data(scsi::lba_status_header_bytes + wanted * scsi::lba_status_descriptor_bytes);
  auto r = co_await run(scsi::get_lba_status16(lba, static_cast<std::uint32_t>(data.size())), data);
  if (!r) co_return fail(r.error());
  if (is_illegal_request(*r)) co_return fail(errc::not_supported);
  if (auto ok = check(*r); !ok) co_return fail(ok.error());
  co_return scsi::parse_lba_status(std::span(data).first(received(*r, data.size())));
}

Awaitable<Result<void>> LunHandle::test_unit_ready() {
  auto r = co_await run(scsi::test_unit_ready(), {});
  if (!r) co_return fail(r.error());
  co_return check(*r);
}

Awaitable<Result<std::vector<scsi::Lun>>> report_luns(CommandChannel& session) {
  std::uint32_t length = 4096;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // From the session's pool: registered on iSER, so no payload bounce is needed.
    auto pooled = session.buffer_pool().allocate(length);
    CommandRequest req{.lun = scsi::Lun{}, .cdb = scsi::report_luns({.allocation_length = length}),
                       .data_in = pooled.bytes()};
    auto r = co_await session.execute(req);
    if (!r) co_return fail(r.error());
    if (auto ok = check(*r); !ok) co_return fail(ok.error());
    std::vector<std::byte> buf(pooled.bytes().begin(), pooled.bytes().begin() + static_cast<std::ptrdiff_t>(received(*r, length)));
    auto full = scsi::report_luns_full_size(buf);
    if (!full) co_return fail(full.error());
    if (*full <= buf.size() || attempt == 1) co_return scsi::parse_report_luns(buf);
    length = *full;
  }
  co_return fail(errc::protocol_error);
}

}  // namespace iserkit::initiator
