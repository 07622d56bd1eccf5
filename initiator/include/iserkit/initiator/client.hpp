// BlockingClient: a synchronous wrapper over Session + LunHandle for tools and threads that are
// not coroutines. It owns an io_context and one thread running it; each call posts the coroutine
// to that thread and blocks on a future. Layer 6 (public API).
//
// THREADING: every method may be called from any thread except the client's own I/O thread;
// calls from several threads run concurrently on the session (they are many commands in flight).
// BUFFERS: the caller's spans are used in place (zero copy); the call returns only when the
// command is done with them.
#pragma once

#include <future>
#include <optional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::initiator {

/// A logged-in session and an opened LUN behind blocking calls.
class BlockingClient {
 public:
  /// Connects, logs in to url.target and opens url.lun (0 when absent). Errors: as
  /// Session::connect() and LunHandle::open().
  static Result<std::unique_ptr<BlockingClient>> open(const Url& url, SessionOptions options = {});
  /// SendTargets discovery on a private io_context. Errors: as discover().
  static Result<std::vector<DiscoveredTarget>> discover(const Url& url, SessionOptions options = {});

  /// Logs out (if still open) and joins the I/O thread.
  ~BlockingClient();
  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;

  [[nodiscard]] const LunInfo& info() const noexcept { return lun_->info(); }

  Result<void> read(const ReadOptions& options, std::span<std::byte> buffer);
  Result<void> write(const WriteOptions& options, std::span<const std::byte> buffer);
  Result<void> read_bytes(std::uint64_t offset_bytes, std::span<std::byte> buffer);
  Result<void> write_bytes(std::uint64_t offset_bytes, std::span<const std::byte> data, ByteWriteOptions options = {});
  Result<void> synchronize_cache(FlushOptions options = {});
  Result<void> unmap(std::span<const BlockRange> ranges);
  Result<void> write_zeroes(WriteZeroesOptions options);
  Result<scsi::StandardInquiry> inquiry();
  Result<std::vector<std::uint8_t>> supported_vpd_pages();
  Result<std::string> unit_serial_number();
  Result<std::vector<scsi::Designator>> device_identification();
  Result<scsi::BlockLimits> block_limits();
  Result<scsi::LogicalBlockProvisioning> logical_block_provisioning();
  Result<Capacity> read_capacity();
  Result<std::vector<scsi::Lun>> report_luns();
  /// Logs out now; later calls fail with errc::session_closed.
  Result<void> logout();

  /// Runs any awaitable on the client's thread and waits for it (for calls not wrapped above).
  template <class T>
  Result<T> run(Awaitable<Result<T>> op) {
    std::promise<Result<T>> promise;
    auto future = promise.get_future();
    asio::co_spawn(io_, deliver(std::move(op), promise), asio::detached);
    return future.get();
  }

  /// The session and the LUN handle; use them only from coroutines run through run().
  [[nodiscard]] Session& session() noexcept { return *session_; }
  [[nodiscard]] LunHandle& lun() noexcept { return *lun_; }

 private:
  BlockingClient();
  template <class T>
  static Awaitable<void> deliver(Awaitable<Result<T>> op, std::promise<Result<T>>& promise) {
    promise.set_value(co_await std::move(op));
  }
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::shared_ptr<Session> session_;
  std::optional<LunHandle> lun_;
};

}  // namespace iserkit::initiator
