// The iSER datamover (RFC 7145): iSCSI over an RDMA reliable connection set up with librdmacm,
// for both ends. Control-type PDUs travel as RDMA SENDs, each prefixed with the 28-byte iSER
// header; the target moves read data with RDMA Write into the initiator's Read STag and fetches
// write data with RDMA Read from its Write STag (put_data/get_data), so no Data-In, R2T or
// solicited Data-Out PDU ever crosses the wire. The login phase runs over the same SENDs
// ("iSER-assisted" login, as Linux ib_iser and isert do; no Hello exchange on IB/RoCE).
//
// Buffers: buffer_pool() hands out chunks of large slabs registered once per protection domain
// (RegisteredBufferPool); receive and send descriptors are registered once per connection. No
// ibv_reg_mr happens per command. Receive buffers are sized from the declared
// (Initiator|Target)RecvDataSegmentLength and their number from the command window.
//
// Events: the CM event channel and the CQ completion channel are file descriptors watched by the
// Asio loop (posix::stream_descriptor::async_wait); nothing blocks and no extra thread runs.
// Teardown: close() disconnects; the QP flushes every posted work request, each waiter gets
// errc::connection_closed; DISCONNECTED and DEVICE_REMOVAL events close the connection too.
// Device loss (RDMA_CM_EVENT_DEVICE_REMOVAL, IBV_EVENT_DEVICE_FATAL, or the device no longer
// listed): every verbs object on it — QPs, CQs, completion channels, MRs, the PD, cm_ids — is
// released at once, since the kernel's removal waits for user space; a listener listens again
// when a device serves its address, and an initiator reconnects through its caller's recovery.
//
// Without WITH_ISER (no rdma-core at build time) the functions below exist and fail with
// errc::not_supported, so front ends need no #ifdef.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/datamover/datamover.hpp"

namespace iserkit::datamover {

/// True when this build has the iSER datamover (CMake WITH_ISER).
[[nodiscard]] bool iser_built() noexcept;

/// True when iSER is built and the host has at least one RDMA device (ibv_get_device_list).
[[nodiscard]] bool rdma_device_present() noexcept;

/// How an initiator exposes its buffers to the target (RFC 7145 §9.2 STags).
enum class IserStags {
  /// Per command when the device binds type 2 memory windows, else the whole slab.
  automatic,
  /// Each command's buffer through a memory window of its own, bound for that command and
  /// invalidated when it ends (Local Invalidate, or the target's Send with Invalidate); the
  /// registered pool itself has no remote access. Connecting fails (errc::not_supported) on a
  /// device without type 2 windows.
  per_command,
  /// The registered slab's own rkey, valid for the connection's life (a command timeout then
  /// closes the connection). For peers or devices the per-command mode cannot serve.
  whole_slab,
};

/// The IserStags named by `text`: "per-command", "automatic" (or "auto"), "whole-slab"; nullopt
/// for anything else. The spelling of ISERKIT_ISER_STAGS (initiator/src/transport_select.cpp).
[[nodiscard]] constexpr std::optional<IserStags> parse_iser_stags(std::string_view text) noexcept {
  if (text == "per-command") return IserStags::per_command;
  if (text == "automatic" || text == "auto") return IserStags::automatic;
  if (text == "whole-slab") return IserStags::whole_slab;
  return std::nullopt;
}

/// Sizing of one iSER connection. Lengths in bytes, depths in work requests.
struct IserOptions {
  /// This side's declared (Initiator|Target)RecvDataSegmentLength (RFC 7145 §6.4/§6.5): the data
  /// part of every posted receive buffer; also the login-phase minimum of 8192 (RFC 7143 §13.12).
  std::uint32_t recv_data_segment_length = 8192;
  /// Receive buffers posted: commands in flight + unexpected PDUs from the peer + a margin for
  /// immediate PDUs (iser::receive_depth). The initiator uses its command limit, the target its
  /// CmdSN window.
  std::uint32_t receive_depth = 160;
  /// SEND descriptors (registered send slots) and RDMA operations that may be in flight.
  std::uint32_t send_depth = 160;
  /// Connect/accept time limit (address and route resolution, connection establishment).
  std::chrono::milliseconds timeout{10000};
  /// Initiator: the largest data transfer one SCSI command should carry, bytes, reported as
  /// Capabilities::max_transfer_bytes (0 = no limit). Targets' RDMA buffers limit it (tgt: 512 KiB
  /// per command). Unused by the target.
  std::uint32_t max_transfer_bytes = 0;
  /// Initiator: the per-command cap for a LUN whose Block Limits VPD states no MAXIMUM TRANSFER
  /// LENGTH, bytes, reported as Capabilities::unstated_max_transfer_bytes (0 = none). Unused by
  /// the target.
  std::uint32_t unstated_max_transfer_bytes = 0;
  /// Target: how often a listener whose RDMA device went away (RDMA_CM_EVENT_DEVICE_REMOVAL)
  /// tries to listen on its address again.
  std::chrono::milliseconds relisten_interval{1000};
  /// Initiator: the network namespace (/run/netns/NAME) the RDMA CM id is created in (empty: the
  /// calling thread's); rdma_cm resolves and routes the connection in that namespace, so it goes
  /// out of that namespace's netdev (e.g. a tenant's VXLAN device). Unused by the target (its
  /// listeners are created inside the namespace instead).
  std::string netns;
  /// Initiator: how command buffers are exposed (see IserStags). Unused by the target. automatic
  /// by default: a window per command where the device binds type 2 windows. (The lab's first
  /// per-command run panicked Debian 12's rxe; the cause was a Local Invalidate of a window the
  /// target had already invalidated with Send with Invalidate, which iserkit no longer offers
  /// unless asked and detects even when 6.1 rxe misreports it: docs/iser.md.)
  IserStags stags = IserStags::automatic;
  /// Send with Invalidate (RFC 7145 §5.1, CM private data). Target: accept it when the initiator
  /// offers it in its CM REQ (its SCSI Responses then invalidate the command's STag,
  /// IBV_WR_SEND_WITH_INV). Initiator: offer it when per-command STags are in use. Off by default
  /// on both sides: on Debian 12's 6.1 rxe a window the peer invalidated must never be invalidated
  /// again locally (rxe_do_invalidate_mw() then dereferences the window's NULL QP pointer and the
  /// kernel panics), so the initiator may only offer it where the receive completion reliably
  /// reports IBV_WC_WITH_INV; not yet proved in the lab (docs/iser.md).
  bool send_with_invalidate = false;
};

/// How this process used its iSER send queues (every connection, both roles): the proof of
/// batching per loop pass (issue 23 item 7). Thread-safe snapshot of relaxed counters.
struct IserPostCounts {
  std::uint64_t post_send_calls = 0;  ///< ibv_post_send() calls (a chain counts once)
  std::uint64_t work_requests = 0;    ///< send-queue work requests posted (SEND, RDMA, Bind MW, Local Invalidate)
  std::uint64_t scsi_commands = 0;    ///< SCSI Command PDUs sent (initiator) or received (target) over iSER
};
/// The counts so far (zeros in a build without iSER).
IserPostCounts iser_post_counts() noexcept;
/// Whether RDMA Writes and Bind MW work requests join the SENDs of a pass in one chain (the
/// default); ISERKIT_ISER_CHAIN=off in the environment posts them on their own, as before issue 23
/// item 7 (for measuring the difference). Read once per process.
bool iser_chain_enabled() noexcept;

/// Initiator: resolves `host`:`port` (the iSCSI portal; RDMA CM maps it to the IB/RoCE service
/// 3260 + TCP port space), resolves the route, creates the QP and connects with the iSER CM REQ
/// private data (ZBVA not supported; Send with Invalidate supported only with per-command STags). The datamover runs on
/// `ex`, which must be single-threaded.
/// Errors: errc::not_supported (no iSER in this build), errc::timeout, errc::connection_closed
/// (rejected or unreachable), std::errc::no_such_device (no RDMA device for that address).
Awaitable<Result<std::unique_ptr<Datamover>>> iser_connect(asio::any_io_executor ex, std::string host,
                                                           std::uint16_t port, IserOptions options = {});

/// Target: an RDMA CM listener on an iSCSI portal address. Accepted connections get their own CM
/// event channel and CQ, watched by the executor passed to accept().
class IserListener {
 public:
  struct Impl;
  /// Binds and listens on `host`:`port` ("0.0.0.0"/"::" for every address; port 0 picks one).
  /// Runs its event channel on `ex` (single-threaded). Errors: errc::not_supported (no iSER
  /// built), std::errc::no_such_device (no RDMA device), bind/listen errno.
  static Result<std::unique_ptr<IserListener>> listen(asio::any_io_executor ex, const std::string& host,
                                                      std::uint16_t port, IserOptions options = {});
  ~IserListener();
  IserListener(const IserListener&) = delete;
  IserListener& operator=(const IserListener&) = delete;

  /// Waits for the next connection request, accepts it (CM REP private data: ZBVA not used; Send
  /// with Invalidate used when the initiator supports it and IserOptions::send_with_invalidate) and returns its datamover, which runs on `connection_executor`.
  /// A request that cannot be served (QP creation fails) is rejected and the wait goes on.
  /// When the RDMA device under the address is removed, the listener lets go of it and keeps
  /// trying to listen again every IserOptions::relisten_interval; the wait goes on meanwhile.
  /// Errors: errc::connection_closed once close() was called.
  Awaitable<Result<std::unique_ptr<Datamover>>> accept(asio::any_io_executor connection_executor);

  /// Stops listening; a pending accept() completes with errc::connection_closed. Call on the
  /// listener's executor.
  void close() noexcept;
  /// The bound port.
  [[nodiscard]] std::uint16_t port() const noexcept;

 private:
  explicit IserListener(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace iserkit::datamover
