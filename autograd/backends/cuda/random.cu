// Random fills from the counter-based generator (autograd/random.h): element i takes the bits
// random_bits(seed, offset, i). The function is the same code the CPU runs, so the bits are identical,
// and a dropout mask (a comparison of those bits, no arithmetic) matches the CPU's bit for bit.
// uniform and normal do float arithmetic after that, which nvcc may contract into FMAs and the device's
// log/cos round differently: those agree with the CPU within rounding.
//
// Mapping: one thread per element, grid-stride; each thread runs ten Philox rounds (pure integer work,
// no memory but the store), which is why counter-based generators suit GPUs.
// Sampling a token (chapter 12) lives here too: a draw from the distribution the logits give, on the device.
#include "../sampling_math.h"
#include "autograd/random.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

#include <bit>
#include <limits>

#include "autograd/errors.h"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T>
__global__ void random_fill_kernel(T* out, std::int64_t n, Distribution dist, double a, double b, std::uint64_t seed,
                                   std::uint64_t offset) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const std::uint64_t bits = random_bits(seed, offset, static_cast<std::uint64_t>(i));
    switch (dist) {
      case Distribution::uniform: {
        const T v = static_cast<T>(a + (b - a) * uniform01(bits));  // float rounding can reach b: keep [a, b)
        out[i] = v >= static_cast<T>(b) && a < b ? nextafter_(static_cast<T>(b), static_cast<T>(a)) : v;
        break;
      }
      case Distribution::normal: out[i] = static_cast<T>(a + b * standard_normal(bits)); break;
      case Distribution::dropout: out[i] = uniform01(bits) < a ? T(0) : static_cast<T>(1.0 / (1.0 - a)); break;
    }
  }
}

// One block draws one token by sampling_math.h's steps. The block finds the first largest logit (each thread the
// first largest of its ids, then `block_reduce` over those: the same id `first_max` returns), computes the weights,
// and sorts the ids likeliest first (`likelier`) with a bitonic sort (Batcher 1968): log2(P) (log2(P) + 1) / 2
// passes over P = the next power of two >= V, each compare-exchanging disjoint pairs, a barrier between passes. Ids
// from V to P - 1 pad it and go last. Ranking each id by counting the ids likelier than it took V^2 comparisons
// on the block's threads: 4 million at V = 2,000, against 66 passes of 1,024 here. Thread 0 then cuts (sums the
// kept mass), the block renormalises, and thread 0 draws: the sums on one thread, in the order every backend sums
// in. One thread's walks over V values are bound by the latency of each read: from global memory they took most of
// the kernel's 0.71 ms on an H200 at V = 2,000 (docs/performance.md). So the weights, the sorted weights and the
// order (V + P doubles and P int32 ids) live in dynamic shared memory when they fit in the 48 KiB a launch gets
// without opting in (V <= 2,048), and in global memory otherwise (the weights in `p`, the rest in scratch); the same
// code reads either through `weights`, `sorted` and `order`.
constexpr unsigned kSampleThreads = 1024;

// first_max over the block: id a comes first if its weight is larger, or equal and its id lower; a NaN never comes
// first (first_max never moves to one) unless it is id 0, where first_max starts and stays.
__device__ std::int64_t block_first_max(const double* w, std::int64_t n) {
  const auto earlier = [w](std::int32_t a, std::int32_t b) {  // of two candidate ids (-1: none), the first
    if (a < 0) return b;
    if (b < 0) return a;
    return w[b] > w[a] || (w[b] == w[a] && b < a) ? b : a;
  };
  std::int32_t mine = -1;  // ids below 2^31 (sample_token checks)
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x)
    if (w[v] == w[v]) mine = earlier(mine, static_cast<std::int32_t>(v));
  const std::int32_t best = block_reduce(mine, earlier, std::int32_t{-1});
  return w[0] == w[0] && best >= 0 ? best : 0;
}

// Sorts sorted[0, P) (the weights) and order[0, P) (their ids) likeliest first; ids >= n are padding, last.
__device__ void bitonic_sort(double* sorted, std::int32_t* order, std::int64_t n, std::int64_t P) {
  const auto before = [&](std::int64_t a, std::int64_t b) {  // whether slot a's id comes before slot b's
    if (order[a] >= n || order[b] >= n) return order[a] < order[b];
    return sorted[a] > sorted[b] || (sorted[a] == sorted[b] && order[a] < order[b]);
  };
  for (std::int64_t k = 2; k <= P; k *= 2)
    for (std::int64_t j = k / 2; j > 0; j /= 2) {
      for (std::int64_t t = threadIdx.x; t < P / 2; t += blockDim.x) {  // pair t: slots i and i + j
        const std::int64_t i = 2 * t - (t & (j - 1)), l = i + j;
        if (before(l, i) == ((i & k) == 0)) {  // runs of k alternate: first-to-last, then last-to-first
          const double s = sorted[i];
          sorted[i] = sorted[l], sorted[l] = s;
          const std::int32_t o = order[i];
          order[i] = order[l], order[l] = o;
        }
      }
      __syncthreads();
    }
}

template <class T>
__global__ void sample_token_kernel(std::int64_t* token, double* p, void* scratch, const T* logits, std::int64_t n,
                                    std::int64_t P, bool in_shared, SamplingConfig cfg, double u,
                                    const std::int64_t* counter, std::uint64_t seed, std::uint64_t offset,
                                    std::int64_t counter_base) {
  CUDASIM_DYNAMIC_SHARED(double, shared);
  double* weights = in_shared ? shared : p;
  double* sorted = in_shared ? shared + n : static_cast<double*>(scratch);
  auto* order = reinterpret_cast<std::int32_t*>(sorted + P);
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) weights[v] = static_cast<double>(logits[v]);
  __syncthreads();
  const std::int64_t best = block_first_max(weights, n);
  const double max_logit = weights[best];
  __syncthreads();  // every thread has read the largest logit before the weights replace the logits
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x)
    weights[v] = sampling_weight(weights[v], max_logit, v == best, cfg.temperature);
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    sorted[i] = i < n ? weights[i] : 0.0;
    order[i] = static_cast<std::int32_t>(i);
  }
  __syncthreads();
  bitonic_sort(sorted, order, n, P);
  // cut_and_draw's steps, the renormalisation spread over the threads, the sums on thread 0
  __shared__ Cut kept;
  if (threadIdx.x == 0) kept = cut(sorted, static_cast<std::size_t>(n), cfg);
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    weights[order[i]] = renormalised(sorted, static_cast<std::size_t>(i), kept);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (counter) u = token_uniform(seed, offset, *counter - counter_base);  // read here at each replay
    *token = draw(weights, static_cast<std::size_t>(n), u);
  }
  if (in_shared)
    for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) p[v] = weights[v];
}

}  // namespace

void CudaBackend::random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                              std::uint64_t offset) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype, "random_fill", [&](auto t) {
    using T = decltype(t);
    launch(random_fill_kernel<T>, blocks_for(n, 256), 256u, 0, static_cast<T*>(out.data), n, dist, a, b, seed, offset);
  });
}

void CudaBackend::sample_token(const TensorDesc& token, const TensorDesc& probs, const TensorDesc& logits,
                               const SamplingConfig& cfg, const TokenDraw& d) {
  const std::int64_t n = logits.numel();
  constexpr std::int64_t kMaxIds = std::numeric_limits<std::int32_t>::max() / 2;  // P, a power of two, in int32
  if (n > kMaxIds)
    throw ShapeError("cuda sample_token: " + std::to_string(n) + " logits, more than the " + std::to_string(kMaxIds) +
                     " ids its sort holds");
  const std::int64_t P = std::bit_ceil(static_cast<std::uint64_t>(n));
  const std::size_t sort_bytes = static_cast<std::size_t>(P) * (sizeof(double) + sizeof(std::int32_t)),
                    all_bytes = static_cast<std::size_t>(n) * sizeof(double) + sort_bytes;
  const bool in_shared = all_bytes <= 47 * 1024;  // 48 KiB less the static: block_reduce's partials and the cut
  void* scratch = in_shared ? nullptr : allocate(sort_bytes);
  dispatch_floating(logits.dtype, "sample_token", [&](auto t) {
    using T = decltype(t);
    launch(sample_token_kernel<T>, 1u, kSampleThreads, in_shared ? all_bytes : 0,
           static_cast<std::int64_t*>(token.data), static_cast<double*>(probs.data), scratch,
           static_cast<const T*>(logits.data), n, P, in_shared, cfg, d.u,
           static_cast<const std::int64_t*>(d.counter.data), d.seed, d.offset, d.counter_base);
  });
  if (scratch) deallocate(scratch, sort_bytes);  // the cache hands it out again only to work queued after this kernel
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
