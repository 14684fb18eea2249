// The CPU backend's gemm kernel: the Backend's batched, broadcast, strided product handed to the CPU GEMM
// (gemm.cpp) one batch index at a time.
#include <omp.h>

#include <type_traits>
#include <vector>

#include "aligned.h"
#include "rows.h"
#include "cpu_backend.h"
#include "gemm.h"
#include "strided.h"

namespace stepformer::cpu {

// Batched and broadcast matmul: one GEMM per batch index. Many small products (attention's [B, H, T, T])
// run one per thread; a few large ones each use every thread. A bfloat16 product is summed in float32 and rounded
// once as it is stored (gemm_rounded).
void CpuBackend::gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) {
  const int nd = c.ndim;
  const std::int64_t M = c.shape[nd - 2], N = c.shape[nd - 1], K = a.shape[nd - 1];
  std::int64_t batch = 1;
  for (int d = 0; d < nd - 2; ++d) batch *= c.shape[d];
  auto offset = [&](const TensorDesc& t, std::int64_t bi) {
    std::int64_t off = 0;
    for (int d = nd - 3; d >= 0; --d) {
      off += (bi % c.shape[d]) * t.strides[d];
      bi /= c.shape[d];
    }
    return off;
  };
  dispatch_gemm(c.dtype, a.dtype, "cpu gemm", [&](auto tc, auto tab) {
    using TC = decltype(tc);
    using TA = decltype(tab);
    using T = std::conditional_t<std::is_same_v<TC, bfloat16>, float, TC>;  // the type it computes in
    // An empty tensor's data is null, and null plus an offset is undefined (clang's UBSan says so): it stays null.
    auto at = [&](auto* p, const TensorDesc& t, std::int64_t bi) { return p == nullptr ? p : p + offset(t, bi); };
    auto one = [&](std::int64_t bi, int threads) {
      const MatrixView<const TA> av{at(ptr<const TA>(a), a, bi), a.strides[nd - 2], a.strides[nd - 1]};
      const MatrixView<const TA> bv{at(ptr<const TA>(b), b, bi), b.strides[nd - 2], b.strides[nd - 1]};
      TC* const cp = at(ptr<TC>(c), c, bi);
      const std::int64_t rs = c.strides[nd - 2], cs = c.strides[nd - 1];
      if constexpr (std::is_same_v<T, TC>) {
        cpu::gemm<T, TA>(M, N, K, static_cast<T>(alpha), av, bv, static_cast<T>(beta), {cp, rs, cs}, threads);
      } else {
        cpu::gemm_rounded(M, N, K, static_cast<T>(alpha), av, bv, static_cast<T>(beta), {cp, rs, cs}, threads);
      }
    };
    const std::int64_t flops = M * N * K;
    if (batch > 1 && flops < (1 << 21)) {
#pragma omp parallel for schedule(static) if (batch * flops >= kParallelGrain)
      for (std::int64_t bi = 0; bi < batch; ++bi) one(bi, 1);
    } else {
      for (std::int64_t bi = 0; bi < batch; ++bi) one(bi, flops >= kParallelGrain ? 0 : 1);
    }
  });
}

}  // namespace stepformer::cpu
