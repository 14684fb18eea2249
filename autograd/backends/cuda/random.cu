// Random fills from the counter-based generator (autograd/random.h): element i takes the bits
// random_bits(seed, offset, i). The function is the same code the CPU runs, so the bits are identical,
// and a dropout mask (a comparison of those bits, no arithmetic) matches the CPU's bit for bit.
// uniform and normal do float arithmetic after that, which nvcc may contract into FMAs and the device's
// log/cos round differently: those agree with the CPU within rounding.
//
// Mapping: one thread per element, grid-stride; each thread runs ten Philox rounds (pure integer work,
// no memory but the store), which is why counter-based generators suit GPUs.
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

}  // namespace stepformer::STEPFORMER_CUDA_NS
