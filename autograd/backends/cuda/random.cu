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

// One block draws one token by sampling_math.h's steps: thread 0 finds the largest logit, the block computes the
// weights and ranks each id by counting the ids likelier than it (V^2 comparisons over the block's threads, as
// sort_positions_kernel ranks positions) and gathers the weights in rank order; thread 0 cuts (sums the kept
// mass), the block renormalises, and thread 0 draws: the sums on one thread, in the order every backend sums in.
// One thread's walks over V values are bound by the latency of each read: from global memory they took most of the
// kernel's 0.71 ms on an H200 at V = 2,000 (docs/performance.md). So the weights and their sorted copy live in
// dynamic shared memory (2 V doubles) when they fit in the 48 KiB a launch gets without opting in (V <= 3,072),
// and in the global scratch otherwise; the same code reads either through `weights` and `sorted`.
constexpr unsigned kSampleThreads = 1024;
constexpr std::int64_t kSampleSharedValues = 48 * 1024 / (2 * sizeof(double));

template <class T>
__global__ void sample_token_kernel(std::int64_t* token, double* p, std::int64_t* order, double* global_sorted,
                                    const T* logits, std::int64_t n, SamplingConfig cfg, double u,
                                    const std::int64_t* counter, std::uint64_t seed, std::uint64_t offset,
                                    std::int64_t counter_base) {
  CUDASIM_DYNAMIC_SHARED(double, shared);
  const bool in_shared = n <= kSampleSharedValues;
  double* weights = in_shared ? shared : p;
  double* sorted = in_shared ? shared + n : global_sorted;
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) weights[v] = static_cast<double>(logits[v]);
  __syncthreads();
  __shared__ std::int64_t best;
  __shared__ double max_logit;
  if (threadIdx.x == 0) {
    best = static_cast<std::int64_t>(first_max(weights, static_cast<std::size_t>(n)));
    max_logit = weights[best];
  }
  __syncthreads();
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x)
    weights[v] = sampling_weight(weights[v], max_logit, v == best, cfg.temperature);
  __syncthreads();
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    std::int64_t rank = 0;
    for (std::int64_t w = 0; w < n; ++w) rank += likelier(weights, w, v);
    order[rank] = v;
  }
  __syncthreads();
  // cut_and_draw's steps, the gather and the renormalisation spread over the threads, the sums on thread 0
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) sorted[i] = weights[order[i]];
  __syncthreads();
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
  const std::size_t bytes = static_cast<std::size_t>(n) * (sizeof(std::int64_t) + sizeof(double));
  void* scratch = allocate(bytes);
  auto* order = static_cast<std::int64_t*>(scratch);
  dispatch_floating(logits.dtype, "sample_token", [&](auto t) {
    using T = decltype(t);
    const std::size_t shared_bytes = n <= kSampleSharedValues ? static_cast<std::size_t>(2 * n) * sizeof(double) : 0;
    launch(sample_token_kernel<T>, 1u, kSampleThreads, shared_bytes, static_cast<std::int64_t*>(token.data),
           static_cast<double*>(probs.data), order, reinterpret_cast<double*>(order + n),
           static_cast<const T*>(logits.data), n, cfg, d.u, static_cast<const std::int64_t*>(d.counter.data), d.seed,
           d.offset, d.counter_base);
  });
  deallocate(scratch, bytes);  // the cache hands it out again only to work queued after this kernel
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
