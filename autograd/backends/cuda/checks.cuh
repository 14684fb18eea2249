#pragma once
// An index check run by one block of a kernel (checks.cu queues it and reads its result later): the check kernel's
// own block, or block 0 of the kernel that uses the ids (a gather, a row write), so that a check costs no launch of
// its own there.
#include <climits>
#include <cstdint>

#include "compat.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

constexpr std::size_t kCheckSlots = 256;  // a ring of them, or a block of them per turn of a graph (checks.cu)

// Check ids[0, n) against [0, limit) (`allowed` passes too, where has_allowed). Its result goes to slot `index` of
// `slots` ({first bad position, or LLONG_MAX for none; its value}), of the block of the turn `*turn` in a graph's
// slots (turn null: the ring's).
struct IdCheck {
  const std::int64_t* ids;
  std::int64_t n, limit;
  bool has_allowed;
  std::int64_t allowed;
  long long* slots;
  const std::int64_t* turn;
  std::int64_t index;
};

// Every thread of the block calls it. The slot is written whole, bad or not: it needs no reset before a check (a
// graph's replays write the same slots again).
__device__ inline void check_ids_in_block(const IdCheck& c) {
  __shared__ long long first_bad;
  const std::int64_t thread = static_cast<std::int64_t>(threadIdx.y) * blockDim.x + threadIdx.x;
  const std::int64_t threads = static_cast<std::int64_t>(blockDim.x) * blockDim.y;
  if (thread == 0) first_bad = LLONG_MAX;
  __syncthreads();
  for (std::int64_t i = thread; i < c.n; i += threads)
    if ((c.ids[i] < 0 || c.ids[i] >= c.limit) && !(c.has_allowed && c.ids[i] == c.allowed))
      atomicMin(&first_bad, static_cast<long long>(i));
  __syncthreads();
  if (thread == 0) {
    long long* slot =
        c.slots + 2 * (c.index + (c.turn ? *c.turn * static_cast<std::int64_t>(kCheckSlots) : std::int64_t{0}));
    slot[0] = first_bad;
    slot[1] = first_bad == LLONG_MAX ? 0 : static_cast<long long>(c.ids[first_bad]);
  }
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
