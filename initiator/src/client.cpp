// BlockingClient: Session + LunHandle driven from a private io_context thread (layer 6).
#include "iserkit/initiator/client.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit::initiator {

BlockingClient::BlockingClient() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}

BlockingClient::~BlockingClient() {
  if (session_ && session_->is_open()) (void)logout();
  if (session_) {
    // Close on the I/O thread (the session is single-threaded) and let its coroutines end.
    asio::post(io_, [s = session_] { s->close(); });
  }
  lun_.reset();
  session_.reset();
  work_.reset();
  thread_.join();
}

Result<std::unique_ptr<BlockingClient>> BlockingClient::open(const Url& url, SessionOptions options) {
  std::unique_ptr<BlockingClient> c(new BlockingClient());
  auto session = c->run(Session::connect(c->io_.get_executor(), url, std::move(options)));
  if (!session) return fail(session.error());
  c->session_ = *session;
  auto lun = c->run(LunHandle::open(c->session_, scsi::Lun::from_index(url.lun.value_or(0))));
  if (!lun) return fail(lun.error());
  c->lun_.emplace(std::move(*lun));
  return c;
}

Result<std::vector<DiscoveredTarget>> BlockingClient::discover(const Url& url, SessionOptions options) {
  asio::io_context io;
  std::optional<Result<std::vector<DiscoveredTarget>>> result;
  asio::co_spawn(
      io, initiator::discover(io.get_executor(), url, std::move(options)),
      [&](std::exception_ptr e, Result<std::vector<DiscoveredTarget>> r) {
        if (e) std::rethrow_exception(e);
        result = std::move(r);
      });
  io.run();
  return std::move(*result);
}

Result<void> BlockingClient::read(const ReadOptions& o, std::span<std::byte> b) { return run(lun_->read(o, b)); }
Result<void> BlockingClient::write(const WriteOptions& o, std::span<const std::byte> b) { return run(lun_->write(o, b)); }
Result<void> BlockingClient::read_bytes(std::uint64_t off, std::span<std::byte> b) { return run(lun_->read_bytes(off, b)); }
Result<void> BlockingClient::write_bytes(std::uint64_t off, std::span<const std::byte> d, ByteWriteOptions o) {
  return run(lun_->write_bytes(off, d, o));
}
Result<void> BlockingClient::synchronize_cache(FlushOptions o) { return run(lun_->synchronize_cache(o)); }
Result<void> BlockingClient::unmap(std::span<const BlockRange> r) { return run(lun_->unmap(r)); }
Result<void> BlockingClient::write_zeroes(WriteZeroesOptions o) { return run(lun_->write_zeroes(o)); }
Result<scsi::StandardInquiry> BlockingClient::inquiry() { return run(lun_->inquiry()); }
Result<std::vector<std::uint8_t>> BlockingClient::supported_vpd_pages() { return run(lun_->supported_vpd_pages()); }
Result<std::string> BlockingClient::unit_serial_number() { return run(lun_->unit_serial_number()); }
Result<std::vector<scsi::Designator>> BlockingClient::device_identification() {
  return run(lun_->device_identification());
}
Result<scsi::BlockLimits> BlockingClient::block_limits() { return run(lun_->block_limits()); }
Result<scsi::LogicalBlockProvisioning> BlockingClient::logical_block_provisioning() {
  return run(lun_->logical_block_provisioning());
}
Result<Capacity> BlockingClient::read_capacity() { return run(lun_->read_capacity()); }
Result<std::vector<scsi::Lun>> BlockingClient::report_luns() { return run(initiator::report_luns(*session_)); }
Result<void> BlockingClient::logout() { return run(session_->logout()); }

}  // namespace iserkit::initiator
