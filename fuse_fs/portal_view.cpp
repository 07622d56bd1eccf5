// The FUSE view's portal model (see portal_view.hpp): discovery (RFC 7143 Appendix C), lazy
// per-target sessions with reconnection, REPORT LUNS (SPC-5 §6.33) and LUN identification
// (SPC-5 §6.6.2 INQUIRY, §7.7.15 VPD 0x80, §7.7.6 VPD 0x83; SBC-4 §5.20 READ CAPACITY (16)).
#include "fuse_fs/portal_view.hpp"

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {

PortalView::PortalView(asio::any_io_executor ex, ViewOptions options)
    : ex_(std::move(ex)), options_(std::move(options)), listings_(options_.portals.size()) {
  rebuild_root();
}

void PortalView::rebuild_root() {
  // The union of every portal's listing, first portal first; an IQN keeps the first portal that
  // listed it.
  std::vector<std::string> names;
  std::map<std::string, std::size_t, std::less<>> first_portal;
  for (std::size_t i = 0; i < options_.portals.size(); ++i) {
    std::vector<std::string> listed;
    if (!options_.portals[i].target.empty()) {
      listed.push_back(options_.portals[i].target);
    } else if (listings_[i]) {
      listed = *listings_[i];
    }
    for (auto& n : listed) {
      if (first_portal.emplace(n, i).second) names.push_back(std::move(n));
    }
  }
  const auto diff = tree_.set_targets(names);
  for (const auto& s : diff.skipped)
    log::warn("fuse: target name cannot be a directory entry, skipped: name={}", log::escaped(s));
  for (const auto& a : diff.added) log::info("fuse: target listed: {}", log::escaped(a));
  for (const Node* n : tree_.list(root_ino)) {
    if (n->kind != NodeKind::target) continue;
    auto& t = targets_[n->ino];
    if (!t) {
      t = std::make_unique<TargetState>();
      t->iqn = n->name;
      t->dir = n->ino;
    }
    if (auto it = first_portal.find(n->name); it != first_portal.end()) {
      t->portal = options_.portals[it->second];
      t->portal.target = t->iqn;
      t->portal.lun.reset();
    }
  }
  for (auto& [dir, t] : targets_) {
    const Node* n = tree_.get(dir);
    t->present = n != nullptr && n->present;
  }
  for (const auto& r : diff.removed) {
    log::info("fuse: target no longer listed: {}", log::escaped(r));
    if (TargetState* t = target(tree_.target_dir(r)); t != nullptr && t->session && t->session->is_open()) {
      auto s = t->session;
      asio::co_spawn(ex_, [s]() -> Awaitable<void> { co_await s->logout(); }, asio::detached);
    }
  }
}

void PortalView::set_listing(std::size_t portal, const std::vector<std::string>& names) {
  if (portal >= listings_.size()) return;
  listings_[portal] = names;
  rebuild_root();
  root_scanned_at_ = Clock::now();
}

Awaitable<void> PortalView::discover_one(std::size_t i, std::shared_ptr<std::size_t> pending,
                                         std::shared_ptr<Completion> all_done) {
  const auto& url = options_.portals[i];
  auto found = co_await initiator::discover(ex_, url, options_.session);
  if (!found) {
    if (!root_error_) root_error_ = found.error();
    log::warn("fuse: discovery: {}: portal={}", found.error().message(), initiator::format_url(url));
  } else {  // a portal that fails keeps what it listed before
    std::vector<std::string> names;
    for (const auto& t : *found) names.push_back(t.name);
    listings_[i] = std::move(names);
  }
  if (--*pending == 0) all_done->complete();
}

Awaitable<Result<void>> PortalView::refresh_root(bool force) {
  if (shut_down_) co_return Result<void>{};
  if (root_scan_.running()) {
    co_await root_scan_.wait();
    if (root_error_) co_return fail(root_error_);
    co_return Result<void>{};
  }
  bool any = false;
  for (const auto& p : options_.portals) any = any || p.target.empty();
  if (!any || (!force && Clock::now() - root_scanned_at_ < options_.cache_time)) co_return Result<void>{};
  root_scan_.start();
  root_error_ = {};
  // Every portal at once, so one that does not answer delays the listing by one timeout at most.
  auto pending = std::make_shared<std::size_t>(0);
  auto all_done = std::make_shared<Completion>();
  for (std::size_t i = 0; i < options_.portals.size(); ++i) {
    if (options_.portals[i].target.empty()) ++*pending;
  }
  for (std::size_t i = 0; i < options_.portals.size(); ++i) {
    if (options_.portals[i].target.empty()) asio::co_spawn(ex_, discover_one(i, pending, all_done), asio::detached);
  }
  co_await all_done->wait();
  rebuild_root();
  root_scanned_at_ = Clock::now();
  root_scan_.finish();
  if (root_error_) co_return fail(root_error_);
  co_return Result<void>{};
}

Awaitable<Result<std::shared_ptr<initiator::Session>>> PortalView::session(TargetState& t) {
  if (t.session && t.session->is_open()) co_return t.session;
  if (shut_down_) co_return fail(errc::session_closed);
  if (t.connecting.running()) {
    co_await t.connecting.wait();
    if (t.session && t.session->is_open()) co_return t.session;
    co_return fail(t.last_error ? t.last_error : make_error_code(errc::connection_closed));
  }
  if (t.last_error && Clock::now() - t.failed_at < options_.reconnect_backoff) co_return fail(t.last_error);
  t.connecting.start();
  const initiator::Url& url = t.portal;
  const bool again = t.session != nullptr;
  auto s = co_await initiator::Session::connect(ex_, url, options_.session);
  if (s) {
    t.session = *s;
    t.last_error = {};
    log::info("fuse: {}: target={} peer={}", again ? "logged in again" : "logged in", log::escaped(t.iqn),
              t.session->peer());
  } else {
    t.last_error = s.error();
    t.failed_at = Clock::now();
    log::warn("fuse: login: {}: target={}", s.error().message(), log::escaped(t.iqn));
  }
  t.connecting.finish();
  if (!s) co_return fail(s.error());
  co_return *s;
}

Awaitable<Result<std::shared_ptr<LunState>>> PortalView::open_lun(TargetState& t,
                                                                  std::shared_ptr<initiator::Session> s,
                                                                  std::uint16_t index) {
  auto h = co_await initiator::LunHandle::open(s, scsi::Lun::from_index(index));
  if (!h) co_return fail(h.error());
  auto l = std::make_shared<LunState>();
  l->target = &t;
  l->index = index;
  auto& m = l->metadata;
  m.index = index;
  if (auto inq = co_await h->inquiry()) {
    m.vendor = inq->vendor;
    m.product = inq->product;
    m.revision = inq->revision;
  }
  if (auto sn = co_await h->unit_serial_number()) {
    const auto first = sn->find_first_not_of(' ');
    m.serial = first == std::string::npos ? std::string() : sn->substr(first);
  }
  if (auto ids = co_await h->device_identification()) m.designators = std::move(*ids);
  const auto& info = h->info();
  m.block_size_bytes = info.capacity.block_size_bytes;
  m.blocks = info.capacity.blocks;
  m.thin = info.capacity.thin;
  m.unmapped_reads_zero = info.capacity.unmapped_reads_zero || (info.provisioning && info.provisioning->lbprz != 0);
  m.unmap_supported = info.provisioning && info.provisioning->lbpu;
  l->handle.emplace(std::move(*h));
  co_return l;
}

void PortalView::sync_tree(TargetState& t) {
  std::vector<LunEntry> entries;
  for (const auto& [index, l] : t.luns) entries.push_back({.index = index, .size_bytes = l->metadata.size_bytes()});
  const auto diff = tree_.set_luns(t.dir, entries);
  for (const auto& a : diff.added) log::info("fuse: LUN file appeared: {}/{}", log::escaped(t.iqn), a);
  for (const auto& r : diff.removed) log::info("fuse: LUN file disappeared: {}/{}", log::escaped(t.iqn), r);
}

Awaitable<Result<void>> PortalView::scan_target(TargetState& t) {
  auto s = co_await session(t);
  if (!s) co_return fail(s.error());
  auto listed = co_await initiator::report_luns(**s);
  if (!listed) co_return fail(listed.error());
  std::map<std::uint16_t, std::shared_ptr<LunState>> next;
  for (const auto& lun : *listed) {
    const auto index = lun.index();
    if (!index) {
      log::warn("fuse: LUN with an addressing form the view does not name, skipped: target={} lun=0x{:016x}",
                log::escaped(t.iqn),
                lun.raw());
      continue;
    }
    auto old = t.luns.find(*index);
    if (old != t.luns.end() && old->second->handle && old->second->handle->session() == *s) {
      // Known LUN on the current session: pick up a capacity change (SBC-4 §5.20).
      auto& l = *old->second;
      if (auto cap = co_await l.handle->read_capacity(); cap && (cap->blocks != l.metadata.blocks ||
                                                                 cap->block_size_bytes != l.metadata.block_size_bytes)) {
        if (auto h = co_await initiator::LunHandle::open(*s, lun)) {
          l.handle.emplace(std::move(*h));
          l.metadata.blocks = l.handle->info().capacity.blocks;
          l.metadata.block_size_bytes = l.handle->info().capacity.block_size_bytes;
          log::info("fuse: LUN capacity changed: target={} lun={} bytes={}", log::escaped(t.iqn), *index,
                    l.metadata.size_bytes());
        }
      }
      next.emplace(*index, old->second);
      continue;
    }
    if (old != t.luns.end()) {  // known LUN, new session: keep its state (open files share it)
      if (auto h = co_await initiator::LunHandle::open(*s, lun)) old->second->handle.emplace(std::move(*h));
      next.emplace(*index, old->second);
      continue;
    }
    auto opened = co_await open_lun(t, *s, *index);
    if (!opened) {
      log::warn("fuse: open LUN: {}: target={} lun={}", opened.error().message(), log::escaped(t.iqn), *index);
      continue;  // not a block device (errc::not_supported) or not ready: not shown
    }
    next.emplace(*index, *opened);
  }
  t.luns = std::move(next);
  sync_tree(t);
  co_return Result<void>{};
}

Awaitable<Result<void>> PortalView::refresh_target(Ino dir, bool force) {
  TargetState* t = target(dir);
  if (t == nullptr) co_return fail(errc::invalid_argument);
  if (t->scanning.running()) {
    co_await t->scanning.wait();
  } else if (force || !t->scanned || Clock::now() - t->scanned_at >= options_.cache_time) {
    t->scanning.start();
    auto r = co_await scan_target(*t);
    if (r) {
      t->scanned = true;
      t->scanned_at = Clock::now();
      t->last_error = {};
    } else {
      t->last_error = r.error();
      log::warn("fuse: listing LUNs: {}: target={}", r.error().message(), t->iqn);
    }
    t->scanning.finish();
  }
  if (!t->scanned) co_return fail(t->last_error ? t->last_error : make_error_code(errc::connection_closed));
  co_return Result<void>{};
}

Awaitable<Result<void>> PortalView::rescan_all() {
  Result<void> first = co_await refresh_root(true);
  std::vector<Ino> dirs;
  for (const auto& [dir, t] : targets_) {
    if (t->present && t->scanned) dirs.push_back(dir);
  }
  for (Ino dir : dirs) {
    auto r = co_await refresh_target(dir, true);
    if (!r && first) first = r;
  }
  co_return first;
}

TargetState* PortalView::target(Ino dir) const {
  auto it = targets_.find(dir);
  return it == targets_.end() ? nullptr : it->second.get();
}

std::shared_ptr<LunState> PortalView::lun(Ino ino) const {
  const Node* n = tree_.get(ino);
  if (n == nullptr || n->kind != NodeKind::lun || !n->present) return nullptr;
  TargetState* t = target(n->parent);
  if (t == nullptr) return nullptr;
  auto it = t->luns.find(n->lun_index);
  return it == t->luns.end() ? nullptr : it->second;
}

std::string PortalView::info_json(Ino dir) const {
  TargetState* t = target(dir);
  if (t == nullptr) return {};
  TargetInfo info;
  info.target = t->iqn;
  const bool v6 = t->portal.host.find(':') != std::string::npos;
  info.portal = (v6 ? "[" + t->portal.host + "]" : t->portal.host) + ":" + std::to_string(t->portal.port);
  info.url = initiator::format_url(t->portal);
  if (t->session && t->session->is_open()) {
    info.session_state = "logged-in";
    info.parameters = t->session->parameters();
    if (info.parameters->initiator_name.empty()) {
      info.parameters->initiator_name = options_.session.initiator_name.empty() ? initiator::default_initiator_name()
                                                                                : options_.session.initiator_name;
    }
    if (info.parameters->target_name.empty()) info.parameters->target_name = t->iqn;
  } else if (t->last_error) {
    info.session_state = "failed: " + t->last_error.message();
  } else if (t->session) {
    info.session_state = "failed: " + t->session->error().message();
  } else {
    info.session_state = "not-connected";
  }
  for (const auto& [index, l] : t->luns) info.luns.push_back(l->metadata);
  return target_info_json(info);
}

Awaitable<Result<initiator::LunHandle>> PortalView::handle(LunState& l) {
  if (l.handle && l.handle->session()->is_open()) co_return *l.handle;
  if (l.reopening.running()) {
    co_await l.reopening.wait();
    if (l.handle && l.handle->session()->is_open()) co_return *l.handle;
    co_return fail(l.last_error ? l.last_error : make_error_code(errc::connection_closed));
  }
  l.reopening.start();
  Result<initiator::LunHandle> out = fail(errc::connection_closed);
  auto s = co_await session(*l.target);
  if (!s) {
    out = fail(s.error());
  } else if (auto h = co_await initiator::LunHandle::open(*s, scsi::Lun::from_index(l.index)); !h) {
    out = fail(h.error());
  } else {
    l.handle.emplace(std::move(*h));
    l.metadata.blocks = l.handle->info().capacity.blocks;
    l.metadata.block_size_bytes = l.handle->info().capacity.block_size_bytes;
    sync_tree(*l.target);
    out = *l.handle;
  }
  l.last_error = out ? std::error_code{} : out.error();
  l.reopening.finish();
  co_return out;
}

Awaitable<void> PortalView::shutdown() {
  shut_down_ = true;
  for (auto& [dir, t] : targets_) {
    if (!t->session || !t->session->is_open()) continue;
    if (auto r = co_await t->session->logout(); !r) {
      log::warn("fuse: logout: {}: target={}", r.error().message(), t->iqn);
    } else {
      log::info("fuse: logged out: target={}", t->iqn);
    }
  }
}

}  // namespace iserkit::fuse_fs
