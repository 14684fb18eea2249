// Strided batched GEMM, the plain way: for each row of C, accumulate a[m, k] * b[k, :] over k (the
// i-k-j order reads B row-wise). When B's rows are not contiguous (a transposed weight), B is first
// copied into a contiguous [K, N] panel, once per distinct B, so the inner loop runs over unit stride and
// the compiler vectorises it. The fast, blocked, SIMD version is the CPU-speed issue's job.
#include <vector>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

void CpuBackend::gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) {
  const int nd = c.ndim;
  const std::int64_t M = c.shape[nd - 2], N = c.shape[nd - 1], K = a.shape[nd - 1];
  std::int64_t batch = 1;
  for (int d = 0; d < nd - 2; ++d) batch *= c.shape[d];
  const std::int64_t a_m = a.strides[nd - 2], a_k = a.strides[nd - 1];
  const std::int64_t b_k = b.strides[nd - 2], b_n = b.strides[nd - 1];
  const std::int64_t c_m = c.strides[nd - 2], c_n = c.strides[nd - 1];

  // Does B change with the batch index? If not (a weight broadcast over the batch), pack it once.
  bool b_batched = false;
  for (int d = 0; d < nd - 2; ++d) b_batched |= b.strides[d] != 0 && c.shape[d] > 1;
  auto batch_offset = [&](const TensorDesc& t, std::int64_t bi) {
    std::int64_t off = 0;
    for (std::int64_t d = nd - 3; d >= 0; --d) {
      off += (bi % c.shape[d]) * t.strides[d];
      bi /= c.shape[d];
    }
    return off;
  };

  dispatch_floating(c.dtype, "gemm", [&](auto t) {
    using T = decltype(t);
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    // panels[p] holds B of batch p (or of every batch when B is shared) as contiguous [K, N].
    std::vector<T> panels;
    const std::int64_t n_panels = b_batched ? batch : 1;
    if (b_n != 1) {
      panels.resize(static_cast<std::size_t>(n_panels * K * N));
#pragma omp parallel for schedule(static) if (n_panels * K * N >= kParallelGrain)
      for (std::int64_t p = 0; p < n_panels; ++p) {
        const T* src = ptr<T>(b) + batch_offset(b, p);
        T* dst = panels.data() + p * K * N;
        for (std::int64_t k = 0; k < K; ++k)
          for (std::int64_t n = 0; n < N; ++n) dst[k * N + n] = src[k * b_k + n * b_n];
      }
    }
#pragma omp parallel if (batch * M * N * K >= kParallelGrain)
    {
      std::vector<T> acc(static_cast<std::size_t>(N));
#pragma omp for schedule(static)
      for (std::int64_t row = 0; row < batch * M; ++row) {
        const std::int64_t bi = row / M, m = row % M;
        std::int64_t a_off = 0, b_off = 0, c_off = 0;
        for (std::int64_t d = nd - 3, r = bi; d >= 0; --d) {
          const std::int64_t i = r % c.shape[d];
          r /= c.shape[d];
          a_off += i * a.strides[d];
          b_off += i * b.strides[d];
          c_off += i * c.strides[d];
        }
        const T* A = ptr<T>(a) + a_off + m * a_m;
        const bool packed = b_n != 1;
        const T* B = packed ? panels.data() + (b_batched ? bi : 0) * K * N : ptr<T>(b) + b_off;
        const std::int64_t row_stride = packed ? N : b_k;
        T* C = ptr<T>(c) + c_off + m * c_m;
        T* __restrict acc_row = acc.data();  // no aliasing with B: lets the compiler vectorise
        std::fill(acc.begin(), acc.end(), T(0));
        for (std::int64_t k = 0; k < K; ++k) {
          const T x = A[k * a_k];
          const T* __restrict Bk = B + k * row_stride;  // unit stride
          for (std::int64_t n = 0; n < N; ++n) acc_row[n] += x * Bk[n];
        }
        for (std::int64_t n = 0; n < N; ++n)  // beta == 0 must not read C: it may hold garbage
          C[n * c_n] = al * acc[static_cast<std::size_t>(n)] + (beta == 0 ? T(0) : be * C[n * c_n]);
      }
    }
  });
}

}  // namespace stepformer::cpu
