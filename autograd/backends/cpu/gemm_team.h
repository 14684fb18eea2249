#pragma once
// How gemm.cpp's loops share a product among OpenMP threads without paying for OpenMP when there is one thread.
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace stepformer::cpu::gemm_detail {

// How many threads a product of M x N x K gets (0: OpenMP's default): a thread is worth starting for about a
// million multiply-adds (~10 us); below that, fewer threads.
inline int team_size(std::int64_t M, std::int64_t N, std::int64_t K, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  return static_cast<int>(std::clamp<std::int64_t>(M * N * K / (1 << 20), 1, threads));
}

// body(thread, team) on `threads` OpenMP threads, or on the calling thread alone, outside OpenMP, for one: a parallel
// region costs libgomp a team and a futex wake at each barrier even when it has one thread (`if (false)`) or is
// nested in another (attention's per-head products): three system calls a product, each about as long as a 64 x 64
// x 32 product's arithmetic (strace, perf). The loops then split their iterations with static_share() and wait for
// each other with team_barrier().
template <class Body>
void on_team(int threads, Body body) {
  if (threads <= 1) return body(0, 1);
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads());
}

// Thread t's iterations of n, [begin, end), as OpenMP's schedule(static) splits them: contiguous, the first n % team
// threads one more.
struct Share {
  std::int64_t begin, end;
};
inline Share static_share(std::int64_t n, int t, int team) {
  const std::int64_t q = n / team, r = n % team, begin = t * q + std::min<std::int64_t>(t, r);
  return {begin, begin + q + (t < r ? 1 : 0)};
}

// Every thread of on_team's team waits here for the others (none to wait for when it is one thread).
inline void team_barrier(int team) {
  if (team > 1) {
#pragma omp barrier
  }
}

}  // namespace stepformer::cpu::gemm_detail
