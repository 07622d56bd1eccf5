// Registered memory for iSER: RegisteredRegion, RegisteredBufferPool (slabs registered once per
// protection domain) and the per-device registry. RFC 7145 §3.2 (STag), §7.3 (data transfer from
// and to registered buffers).
#ifdef ISERKIT_WITH_ISER
#include "iser_verbs.hpp"

#include <fcntl.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <new>

#include "iserkit/common/log.hpp"

namespace iserkit::datamover::rdma {

void RegisteredRegion::FreeDeleter::operator()(std::byte* p) const noexcept { std::free(p); }

RegisteredRegion::RegisteredRegion(ibv_pd* pd, std::size_t bytes, int access) {
  const std::size_t size = (bytes + 4095) & ~std::size_t{4095};
  memory_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, size)));
  if (!memory_) return;
  if (pd == nullptr) {  // plain memory (a retired pool)
    size_ = size;
    return;
  }
  mr_.reset(ibv_reg_mr(pd, memory_.get(), size, access));
  if (!mr_) {
    log::warn("iser: ibv_reg_mr of {} bytes failed: errno={}", size, errno);
    memory_.reset();
    return;
  }
  size_ = size;
}

RegisteredRegion::~RegisteredRegion() { mr_.reset(); }

PooledBuffer RegisteredBufferPool::allocate(std::size_t bytes) {
  const std::size_t want = bytes == 0 ? 1 : bytes;
  std::lock_guard lock(mutex_);
  if (want > (std::size_t{1} << max_shift)) {
    const std::size_t capacity = (want + 4095) & ~std::size_t{4095};
    // Reuse the smallest large region that fits (registered once, kept).
    auto best = free_large_.end();
    for (auto it = free_large_.begin(); it != free_large_.end(); ++it)
      if (it->first >= capacity && (best == free_large_.end() || it->first < best->first)) best = it;
    if (best != free_large_.end()) {
      auto [cap, p] = *best;
      free_large_.erase(best);
      const auto* r = find(p, cap);
      return PooledBuffer(this, Buffer{.bytes = {p, bytes}, .lkey = r->lkey(), .rkey = r->rkey()}, cap);
    }
    auto region = std::make_unique<RegisteredRegion>(pd_, capacity, access_);
    if (!*region) throw std::bad_alloc();
    auto* r = region.get();
    regions_.push_back(std::move(region));
    std::sort(regions_.begin(), regions_.end(), [](const auto& a, const auto& b) { return a->data() < b->data(); });
    return PooledBuffer(this, Buffer{.bytes = {r->data(), bytes}, .lkey = r->lkey(), .rkey = r->rkey()}, r->size());
  }
  std::size_t capacity = std::max(std::bit_ceil(want), std::size_t{1} << min_shift);
  const auto cls = static_cast<std::size_t>(std::countr_zero(capacity) - min_shift);
  std::byte* p = nullptr;
  if (!free_[cls].empty()) {
    p = free_[cls].back();
    free_[cls].pop_back();
  } else {
    if (current_slab_ == nullptr || slab_used_ + capacity > current_slab_->size()) {
      // Hand the rest of the old slab out as smaller chunks before starting a new one.
      if (current_slab_ != nullptr) {
        std::size_t left = current_slab_->size() - slab_used_;
        for (int shift = max_shift; shift >= min_shift && left > 0; --shift) {
          const std::size_t piece = std::size_t{1} << shift;
          while (left >= piece) {
            free_[shift - min_shift].push_back(current_slab_->data() + slab_used_);
            slab_used_ += piece;
            left -= piece;
          }
        }
      }
      auto slab = std::make_unique<RegisteredRegion>(pd_, slab_bytes, access_);
      if (!*slab) throw std::bad_alloc();
      current_slab_ = slab.get();
      slab_used_ = 0;
      regions_.push_back(std::move(slab));
      std::sort(regions_.begin(), regions_.end(), [](const auto& a, const auto& b) { return a->data() < b->data(); });
      log::debug("iser: registered a {} MiB slab (regions={})", slab_bytes >> 20, regions_.size());
    }
    p = current_slab_->data() + slab_used_;
    slab_used_ += capacity;
  }
  const auto* r = find(p, capacity);
  return PooledBuffer(this, Buffer{.bytes = {p, bytes}, .lkey = r->lkey(), .rkey = r->rkey()}, capacity);
}

void RegisteredBufferPool::release(const Buffer& buffer, std::size_t capacity) noexcept {
  std::lock_guard lock(mutex_);
  auto* p = buffer.bytes.data();
  if (capacity <= (std::size_t{1} << max_shift) && std::has_single_bit(capacity)) {
    free_[static_cast<std::size_t>(std::countr_zero(capacity) - min_shift)].push_back(p);
  } else {
    free_large_.emplace_back(capacity, p);
  }
}

const RegisteredRegion* RegisteredBufferPool::find(const std::byte* p, std::size_t n) const noexcept {
  // regions_ is sorted by address: the candidate is the last region starting at or before p.
  auto it = std::upper_bound(regions_.begin(), regions_.end(), p,
                             [](const std::byte* q, const auto& r) { return q < r->data(); });
  if (it == regions_.begin()) return nullptr;
  --it;
  return (*it)->contains(p, n) ? it->get() : nullptr;
}

std::optional<Buffer> RegisteredBufferPool::registration(std::span<const std::byte> bytes) const noexcept {
  if (bytes.empty()) return std::nullopt;
  std::lock_guard lock(mutex_);
  const auto* r = find(bytes.data(), bytes.size());
  if (r == nullptr || !r->registered()) return std::nullopt;
  return Buffer{.bytes = {const_cast<std::byte*>(bytes.data()), bytes.size()}, .lkey = r->lkey(), .rkey = r->rkey()};
}

ibv_mr* RegisteredBufferPool::memory_region(std::span<const std::byte> bytes) const noexcept {
  if (bytes.empty()) return nullptr;
  std::lock_guard lock(mutex_);
  const auto* r = find(bytes.data(), bytes.size());
  return r != nullptr ? r->mr() : nullptr;
}

std::size_t RegisteredBufferPool::registrations() const noexcept {
  std::lock_guard lock(mutex_);
  return regions_.size();
}

void RegisteredBufferPool::retire() noexcept {
  std::lock_guard lock(mutex_);
  pd_ = nullptr;
  for (auto& r : regions_) r->deregister();
}

bool RegisteredBufferPool::retired() const noexcept {
  std::lock_guard lock(mutex_);
  return pd_ == nullptr;
}

Device::~Device() {
  local_pool.reset();
  remote_pool.reset();
  window_pool.reset();
  if (pd != nullptr) ibv_dealloc_pd(pd);
}

namespace {
std::mutex registry_mutex;
std::map<ibv_context*, std::unique_ptr<Device>> live_devices;
// Devices that went away: released (pools retired, PD freed once no QP uses it) but kept, since
// front ends may still hold their pools and lease buffers from them.
std::vector<std::unique_ptr<Device>> gone_devices;
std::vector<ibv_context*> removed_contexts;  // device_removed() marks, consumed by the next sweep
}  // namespace

Device* device_for(ibv_context* context) {
  std::lock_guard lock(registry_mutex);
  auto& slot = live_devices[context];
  if (!slot) {
    auto d = std::make_unique<Device>();
    d->context = context;
    d->pd = ibv_alloc_pd(context);
    if (d->pd == nullptr) {
      live_devices.erase(context);
      return nullptr;
    }
    // release_gone_devices() reads IBV_EVENT_DEVICE_FATAL from here without blocking.
    if (const int flags = ::fcntl(context->async_fd, F_GETFL); flags >= 0)
      ::fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK);
    ibv_query_device(context, &d->attr);
    d->local_pool = std::make_unique<RegisteredBufferPool>(d->pd, IBV_ACCESS_LOCAL_WRITE);
    d->remote_pool = std::make_unique<RegisteredBufferPool>(
        d->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (d->type2_windows())
      d->window_pool = std::make_unique<RegisteredBufferPool>(d->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    log::info("iser: device {}: max_qp_wr={} max_qp_rd_atom={} max_qp_init_rd_atom={} max_mw={} type2_windows={}",
              ibv_get_device_name(context->device), d->attr.max_qp_wr, d->attr.max_qp_rd_atom,
              d->attr.max_qp_init_rd_atom, d->attr.max_mw, d->type2_windows());
    slot = std::move(d);
  }
  return slot.get();
}

void mark_device_removed(ibv_context* context) noexcept {
  try {
    std::lock_guard lock(registry_mutex);
    removed_contexts.push_back(context);
  } catch (...) {
    // No memory: the device list tells the sweep the same a moment later.
  }
}

bool device_gone(const Device* device) noexcept {
  std::lock_guard lock(registry_mutex);
  for (const auto& d : gone_devices)
    if (d.get() == device) return true;
  return false;
}

bool retire_gone_devices(std::span<ibv_device* const> present) noexcept {
  std::lock_guard lock(registry_mutex);
  bool changed = false;
  for (auto it = live_devices.begin(); it != live_devices.end();) {
    Device& d = *it->second;
    bool fatal = false;
    ibv_async_event event{};
    while (ibv_get_async_event(d.context, &event) == 0) {
      fatal = fatal || event.event_type == IBV_EVENT_DEVICE_FATAL;
      ibv_ack_async_event(&event);
    }
    const bool listed = std::find(present.begin(), present.end(), d.context->device) != present.end();
    const bool marked = std::find(removed_contexts.begin(), removed_contexts.end(), d.context) != removed_contexts.end();
    if (!fatal && listed && !marked) {
      ++it;
      continue;
    }
    log::warn("iser: device {} is gone ({}): releasing its memory registrations",
              ibv_get_device_name(d.context->device),
              fatal ? "IBV_EVENT_DEVICE_FATAL" : marked ? "RDMA_CM_EVENT_DEVICE_REMOVAL" : "no longer listed");
    d.local_pool->retire();
    d.remote_pool->retire();
    if (d.window_pool) d.window_pool->retire();
    try {
      gone_devices.push_back(std::move(it->second));
    } catch (...) {
      (void)it->second.release();  // kept alive (leaked) rather than freed under its users
    }
    it = live_devices.erase(it);
    changed = true;
  }
  removed_contexts.clear();
  for (auto& d : gone_devices) {
    if (d->pd == nullptr) continue;
    // EBUSY while a connection still has a QP on it: that connection retries once it let go.
    if (ibv_dealloc_pd(d->pd) == 0) {
      d->pd = nullptr;
      changed = true;
      log::info("iser: released the protection domain of a removed device");
    }
  }
  // Until librdmacm has re-read the device list after our last cm_id on a removed device is gone,
  // it keeps that device's context open: keep telling it while removed devices are known (cheap,
  // and only on connect attempts, re-listen ticks and releases).
  return changed || !gone_devices.empty();
}

}  // namespace iserkit::datamover::rdma
#endif  // ISERKIT_WITH_ISER
