// RAII wrappers over rdma-core (libibverbs, librdmacm) for the iSER datamover, the per-device
// resources (protection domain, registered buffer pools) and RegisteredBufferPool: slabs of
// memory registered once per protection domain, handed out in power-of-two chunks so that the I/O
// path never calls ibv_reg_mr (RFC 7145 §3.2: STag = rkey of a registered region).
// Private to common/src/datamover; only built with WITH_ISER.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "iserkit/common/buffer.hpp"

namespace iserkit::datamover::rdma {

/// Deleters for unique_ptr ownership of verbs objects.
struct EventChannelDeleter { void operator()(rdma_event_channel* c) const noexcept { rdma_destroy_event_channel(c); } };
struct CmIdDeleter { void operator()(rdma_cm_id* id) const noexcept { rdma_destroy_id(id); } };
struct CompChannelDeleter { void operator()(ibv_comp_channel* c) const noexcept { ibv_destroy_comp_channel(c); } };
struct CqDeleter { void operator()(ibv_cq* cq) const noexcept { ibv_destroy_cq(cq); } };
struct MrDeleter { void operator()(ibv_mr* mr) const noexcept { ibv_dereg_mr(mr); } };
using EventChannel = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;
using CmId = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using CompChannel = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;

/// Page-aligned memory registered as one region (receive rings, send slots, pool slabs).
class RegisteredRegion {
 public:
  RegisteredRegion() = default;
  /// Allocates `bytes` (rounded up to 4096) and registers them with `access` on `pd`; with a null
  /// `pd` only allocates (plain memory, lkey and rkey 0: a retired pool's new chunks).
  /// Returns an empty region (operator bool false) when allocation or registration fails.
  RegisteredRegion(ibv_pd* pd, std::size_t bytes, int access);
  RegisteredRegion(RegisteredRegion&&) noexcept = default;
  RegisteredRegion& operator=(RegisteredRegion&&) noexcept = default;
  ~RegisteredRegion();
  explicit operator bool() const noexcept { return memory_ != nullptr; }
  /// Drops the memory registration and keeps the memory (its device is gone: the MR must go so
  /// the kernel can finish removing the device, while buffers in it may still be in use).
  void deregister() noexcept { mr_.reset(); }
  [[nodiscard]] bool registered() const noexcept { return mr_ != nullptr; }
  [[nodiscard]] std::byte* data() const noexcept { return memory_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint32_t lkey() const noexcept { return mr_ ? mr_->lkey : 0; }
  [[nodiscard]] std::uint32_t rkey() const noexcept { return mr_ ? mr_->rkey : 0; }
  /// The memory region (memory windows are bound over it).
  [[nodiscard]] ibv_mr* mr() const noexcept { return mr_.get(); }
  [[nodiscard]] bool contains(const std::byte* p, std::size_t n) const noexcept {
    return p >= data() && n <= size_ && p - data() <= static_cast<std::ptrdiff_t>(size_ - n);
  }

 private:
  struct FreeDeleter { void operator()(std::byte* p) const noexcept; };
  Mr mr_;  // declared before memory_: deregistered before the memory is freed
  std::unique_ptr<std::byte, FreeDeleter> memory_;
  std::size_t size_ = 0;
};

/// A BufferPool of registered memory: power-of-two chunks (4 KiB … 16 MiB) carved from 64 MiB slabs,
/// each slab registered once; bigger requests get a region of their own, registered once and kept
/// for reuse. Chunks return to free lists, never to the allocator, so after warm-up allocate()
/// neither allocates nor registers. Thread-safe.
class RegisteredBufferPool final : public BufferPool {
 public:
  /// `access`: IBV_ACCESS_* flags of every region (LOCAL_WRITE, plus REMOTE_READ|REMOTE_WRITE for
  /// an initiator whose buffers the target reads and writes).
  RegisteredBufferPool(ibv_pd* pd, int access) : pd_(pd), access_(access) {}
  RegisteredBufferPool(const RegisteredBufferPool&) = delete;
  RegisteredBufferPool& operator=(const RegisteredBufferPool&) = delete;
  ~RegisteredBufferPool() override = default;

  /// Leases `bytes` bytes of registered memory (lkey and rkey set). Throws std::bad_alloc when
  /// memory cannot be allocated or registered.
  PooledBuffer allocate(std::size_t bytes) override;
  [[nodiscard]] std::optional<Buffer> registration(std::span<const std::byte> bytes) const noexcept override;
  /// The memory region holding `bytes` (to bind a memory window over), or nullptr.
  [[nodiscard]] ibv_mr* memory_region(std::span<const std::byte> bytes) const noexcept;
  /// Memory registrations made so far (slabs + large regions): constant in steady state.
  [[nodiscard]] std::size_t registrations() const noexcept;
  /// The pool's device is gone: deregisters every region (memory and leases stay valid, as plain
  /// memory). From then on registration() answers nothing and allocate() hands out unregistered
  /// memory, so a caller still holding this pool bounces through a live device's pool instead.
  void retire() noexcept;
  [[nodiscard]] bool retired() const noexcept;

  static constexpr std::size_t slab_bytes = std::size_t{64} << 20;

 private:
  void release(const Buffer& buffer, std::size_t capacity) noexcept override;
  const RegisteredRegion* find(const std::byte* p, std::size_t n) const noexcept;

  static constexpr int min_shift = 12;
  static constexpr int max_shift = 24;
  ibv_pd* pd_;  // null once retired
  int access_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<RegisteredRegion>> regions_;  // slabs and large regions
  RegisteredRegion* current_slab_ = nullptr;
  std::size_t slab_used_ = 0;
  std::vector<std::byte*> free_[max_shift - min_shift + 1];
  std::vector<std::pair<std::size_t, std::byte*>> free_large_;  // (capacity, address)
};

/// Per-device resources shared by every connection on that device: the protection domain and
/// the two registered pools (local-only for targets, remote-accessible for initiators). Lives
/// until the device goes away (release_gone_devices()); the object itself (and its pools'
/// memory, which front ends may still lease from) stays until process exit.
struct Device {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;  ///< null once released
  ibv_device_attr attr{};
  std::unique_ptr<RegisteredBufferPool> local_pool;   ///< IBV_ACCESS_LOCAL_WRITE
  std::unique_ptr<RegisteredBufferPool> remote_pool;  ///< + REMOTE_READ | REMOTE_WRITE
  /// IBV_ACCESS_LOCAL_WRITE | MW_BIND, no remote access of its own: initiator buffers the target
  /// reaches only through per-command memory windows (null when the device has no type 2 windows).
  std::unique_ptr<RegisteredBufferPool> window_pool;
  /// The device binds type 2 memory windows with work requests (IBV_DEVICE_MEM_WINDOW_TYPE_2B).
  [[nodiscard]] bool type2_windows() const noexcept {
    return (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0 && attr.max_mw > 0;
  }
  ~Device();
};

/// The Device for a verbs context (created on first use). Thread-safe. nullptr when the protection
/// domain cannot be allocated.
Device* device_for(ibv_context* context);

/// Marks the device of `context` as gone (an RDMA_CM_EVENT_DEVICE_REMOVAL came for it); the next
/// release_gone_devices() releases it. Thread-safe.
void mark_device_removed(ibv_context* context) noexcept;

/// Has `device` been released (release_gone_devices())? Thread-safe.
bool device_gone(const Device* device) noexcept;

/// The device part of release_gone_devices(): devices not in `present`, marked removed or with an
/// IBV_EVENT_DEVICE_FATAL queued get their pools retired and move out of the registry; protection
/// domains of released devices are freed when no QP holds them any more. True when anything was
/// released or any device was ever released (librdmacm should then be told again to drop the
/// contexts of removed devices). Thread-safe.
bool retire_gone_devices(std::span<ibv_device* const> present) noexcept;

/// Releases what this process holds on RDMA devices that are gone — removed (`rdma link delete`,
/// hot unplug: no longer in ibv_get_device_list()), reported with IBV_EVENT_DEVICE_FATAL on the
/// context's async event queue, or marked by mark_device_removed() — so the kernel can finish removing
/// them (it waits until user space has let go of every verbs object and closed the device):
/// their pools are retired (MRs deregistered), their protection domain is freed once no QP uses
/// it any more (connections release theirs on DEVICE_REMOVAL; a later call retries), parked
/// cm_ids on them are destroyed, and librdmacm is asked to close its device context (it does once
/// its last cm_id on the device is destroyed). Cheap when nothing changed (one device list).
/// Thread-safe; call when a connection lost its device, before connecting, and while a listener
/// waits for its device to come back.
void release_gone_devices() noexcept;

}  // namespace iserkit::datamover::rdma
