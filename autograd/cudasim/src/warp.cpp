// Warp collectives (cudasim.h): __shfl_*_sync, __ballot_sync, __syncwarp and the tensor cores' mma.sync, as one
// meeting of the warp's lanes that the last to arrive completes for all; the scheduler (cudasim.cpp) suspends
// and wakes the lanes.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "checker.h"
#include "cudasim/cudasim.h"
#include "mma.h"
#include "scheduler.h"

namespace cudasim {

using namespace detail;

namespace {

// Arrives at the warp's collective; returns this lane's result once every lane of the mask has arrived.
std::uint64_t collective(int kind, unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width,
                         const char* name, Site site) {
  Launch& l = launch_state(name);
  Block& b = *l.b;
  Thread& t = me();
  t.site = site;
  const int warp = t.linear / 32, lane = t.linear % 32;
  const int lanes_here = std::min(32, static_cast<int>(b.threads.size()) - warp * 32);
  const unsigned present = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  if (!(mask >> lane & 1u))
    fail(fmt::format("{}: lane {} of warp {} in {} is not in its own mask {:#010x}", name, lane, warp, where(l), mask));
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail(fmt::format("{}: width {} is not a power of 2 in [1, 32]", name, width));
  WarpOp& op = b.warps[static_cast<std::size_t>(warp)];
  if (!op.active) {
    op.active = true, op.kind = kind, op.mode = mode, op.mask = mask, op.width = width, op.arrived = 0;
    for (int k = 0; k < 32; ++k)  // a lane of the mask that has returned can never arrive
      if ((mask & present) >> k & 1u && b.threads[static_cast<std::size_t>(warp * 32 + k)].state == State::done)
        fail(fmt::format("{}: lane {} of warp {} in {} is in the mask but has exited", name, k, warp, where(l)));
  } else if (op.kind != kind || op.mask != mask || op.mode != mode || op.width != width) {
    fail(
        fmt::format("{}: lanes of warp {} in {} disagree: lane {} passes mask {:#010x}, others {:#010x} (or another "
                    "collective)",
                    name, warp, where(l), lane, mask, op.mask));
  }
  op.values[lane] = value;
  const int segment = lane / width * width;
  int src = lane;
  switch (mode) {  // PTX shfl.sync: a source outside the lane's segment (up/down/bfly) gives its own value
    case Shuffle::idx: src = segment + ((arg % width) + width) % width; break;
    case Shuffle::up: src = lane - segment >= arg ? lane - arg : lane; break;
    case Shuffle::down: src = lane - segment + arg < width ? lane + arg : lane; break;
    case Shuffle::bfly: src = (lane ^ arg) < segment + width ? lane ^ arg : lane; break;
  }
  op.sources[lane] = src;
  op.arrived |= 1u << lane;
  if (op.arrived != (mask & present)) {
    t.state = State::at_warp;
    yield();
    return t.result;
  }
  // The last lane computes everyone's result and wakes the others.
  if (checking()) check_warp(l, b, warp, op.arrived);
  if (kind == 2) ++b.warp_syncs[static_cast<std::size_t>(warp)];  // __syncwarp orders the warp's memory
  std::vector<int>& woken = b.waking;
  woken.clear();
  unsigned votes = 0;
  for (int k = 0; k < 32; ++k)
    if (op.arrived >> k & 1u) votes |= (op.values[k] != 0) << k;
  if (kind == 3) {
    if (op.arrived != 0xffffffffu)
      fail(fmt::format("mma.sync: warp {} in {} has {} lanes; the instruction needs all 32", warp, where(l),
                       __builtin_popcount(op.arrived)));
    mma_bf16(op.values);  // each value: the address of a lane's MmaFragments
  }
  for (int k = 0; k < 32; ++k) {
    if (!(op.arrived >> k & 1u)) continue;
    const int s = op.sources[k];
    const bool readable = s >= 0 && s < 32 && (op.arrived >> s & 1u);
    Thread& other = b.threads[static_cast<std::size_t>(warp * 32 + k)];
    other.result = kind == 1 ? votes : readable ? op.values[s] : ~std::uint64_t{0};  // absent lane: poison
    if (k != lane) woken.push_back(other.linear);
  }
  op.active = false;
  make_ready(b, woken);
  return t.result;
}

}  // namespace

std::uint64_t shuffle(unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width, Site site) {
  return collective(0, mask, value, mode, arg, width, "__shfl_sync", site);
}
unsigned ballot(unsigned mask, bool predicate, Site site) {
  return static_cast<unsigned>(collective(1, mask, predicate, Shuffle::idx, 0, 32, "__ballot_sync", site));
}
void syncwarp(unsigned mask, Site site) { collective(2, mask, 0, Shuffle::idx, 0, 32, "__syncwarp", site); }
void mma_m16n8k16_bf16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], Site site) {
  MmaFragments mine{d, a, b};
  collective(3, 0xffffffffu, reinterpret_cast<std::uint64_t>(&mine), Shuffle::idx, 0, 32, "mma.sync", site);
}

}  // namespace cudasim
