#include "resound/local/batch_regions.h"

namespace resound::local {

std::optional<BatchRegions::Lease> BatchRegions::Take(size_t bytes, size_t max_bytes) {
  if (bytes == 0 || bytes > max_bytes) return std::nullopt;
  // use_count() == 1: only this pool holds it. Counts only fall meanwhile
  // (arrays let go on other threads); only the connection's caller, this
  // thread, makes new holders.
  std::optional<uint32_t> free_slot;
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    const auto& region = regions_[slot];
    if (region && region.use_count() == 1 && region->size() >= bytes) {
      return Lease{slot, region, !server_has_[slot]};
    }
    if (!free_slot && (!region || region.use_count() == 1)) free_slot = slot;
  }
  if (!free_slot) return std::nullopt;
  // Some room to grow: a batch of a few more samples fits the same region.
  const size_t size = ((bytes + bytes / 8 + kGranule - 1) / kGranule) * kGranule;
  regions_[*free_slot] =
      std::make_shared<SharedMemory>(SharedMemory::Create("resound-local-batch", std::min(size, max_bytes), false));
  server_has_[*free_slot] = false;
  return Lease{*free_slot, regions_[*free_slot], true};
}

void BatchRegions::Used(const Lease& lease, bool by_server) noexcept { server_has_[lease.slot] = by_server; }

}  // namespace resound::local
