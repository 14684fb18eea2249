// c[..., M, N] = alpha * a[..., M, K] @ b[..., K, N] + beta * c: the textbook triple loop per batch
// element, the dot product summed in double. Every operand is read through its strides, so a transposed
// operand is just a stride swap. beta == 0 ignores c's old contents (even NaN), as BLAS does. bfloat16
// operands are read as the float32 values they are; a bfloat16 product is rounded once, at the end.
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) {
  const int nd = c.ndim;
  const std::int64_t M = c.shape[nd - 2], N = c.shape[nd - 1], K = a.shape[nd - 1];
  // The batch: every index of c's leading dims (a and b have a stride of 0 where they broadcast).
  TensorDesc batch = c;
  batch.ndim = nd - 2;
  dispatch_gemm(c.dtype, a.dtype, "reference gemm", [&](auto tc, auto tab) {
    using T = decltype(tc);
    using TAB = decltype(tab);
    for_each_index(batch, [&](const Index& lead) {
      Index ia = lead, ib = lead, ic = lead;
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          double dot = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            ia.i[nd - 2] = m, ia.i[nd - 1] = k;
            ib.i[nd - 2] = k, ib.i[nd - 1] = n;
            dot += static_cast<double>(at<TAB>(a, ia)) * static_cast<double>(at<TAB>(b, ib));
          }
          ic.i[nd - 2] = m, ic.i[nd - 1] = n;
          T& out = at<T>(c, ic);
          const double value = alpha * dot + (beta == 0 ? 0.0 : beta * static_cast<double>(out));
          out = static_cast<T>(value);
        }
    });
  });
}

}  // namespace stepformer::reference
