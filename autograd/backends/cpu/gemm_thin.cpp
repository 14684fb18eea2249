// Thin products: A with a few rows, as in a decode step with the KV cache (chapter 12), where one token's
// activations meet each weight matrix. The blocked GEMM packs B (reads it, writes it again) and then reads the
// packed copy, all for M rows of arithmetic: the cached decode step spent 53% of its time in pack_b_panels. Here
// B is read once, in the direction it lies in memory: along k when B is a transposed weight (x @ W^T: each
// column of C is a dot product of A's row with a row of W), else along n (a row of C grows by a[i, k] times
// row k of B). The compiler vectorises both loops (omp simd; a float32 sum in a vector of partial sums, whose
// order differs from the blocked GEMM's: results agree within rounding). Threads split the columns.
#include "gemm_thin.h"

#include <algorithm>

#include "vmath.h"

namespace stepformer::cpu {

namespace {

template <class T, class TA>
[[gnu::always_inline]] inline void small_gemm_impl(std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                                                   const MatrixView<const TA>& a, const MatrixView<const TA>& b, T beta,
                                                   const MatrixView<T>& c) {
  T acc[kSmallN];
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) acc[j] = T(0);
    for (std::int64_t k = 0; k < K; ++k) {
      const T x = static_cast<T>(a.data[i * a.row_stride + k * a.col_stride]);
      const TA* bk = b.data + k * b.row_stride;
      if (b.col_stride == 1)
        for (std::int64_t j = 0; j < N; ++j) acc[j] += x * static_cast<T>(bk[j]);
      else
        for (std::int64_t j = 0; j < N; ++j) acc[j] += x * static_cast<T>(bk[j * b.col_stride]);
    }
    T* ci = c.data + i * c.row_stride;
    for (std::int64_t j = 0; j < N; ++j)
      ci[j * c.col_stride] = alpha * acc[j] + (beta == 0 ? T(0) : beta * ci[j * c.col_stride]);
  }
}

constexpr std::int64_t kColumns = 256;  // columns per chunk: their sums stay in a local buffer

// Columns [j0, j0 + n) of C, n <= kColumns.
template <class T, class TA>
[[gnu::always_inline]] inline void thin_chunk(std::int64_t M, std::int64_t K, T alpha, const MatrixView<const TA>& a,
                                              const MatrixView<const TA>& b, T beta, const MatrixView<T>& c,
                                              std::int64_t j0, std::int64_t n) {
  const bool along_k = b.row_stride == 1 && a.col_stride == 1;
  T acc[kColumns];
  for (std::int64_t i = 0; i < M; ++i) {
    const TA* ai = a.data + i * a.row_stride;
    if (along_k) {
      for (std::int64_t j = 0; j < n; ++j) {
        const TA* bj = b.data + (j0 + j) * b.col_stride;
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t k = 0; k < K; ++k) sum += static_cast<T>(ai[k]) * static_cast<T>(bj[k]);
        acc[j] = sum;
      }
    } else {
      std::fill(acc, acc + n, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T x = static_cast<T>(ai[k * a.col_stride]);
        const TA* bk = b.data + k * b.row_stride + j0 * b.col_stride;
        if (b.col_stride == 1) {
#pragma omp simd
          for (std::int64_t j = 0; j < n; ++j) acc[j] += x * static_cast<T>(bk[j]);
        } else {
          for (std::int64_t j = 0; j < n; ++j) acc[j] += x * static_cast<T>(bk[j * b.col_stride]);
        }
      }
    }
    T* ci = c.data + i * c.row_stride + j0 * c.col_stride;
    for (std::int64_t j = 0; j < n; ++j)
      ci[j * c.col_stride] = alpha * acc[j] + (beta == 0 ? T(0) : beta * ci[j * c.col_stride]);
  }
}

// One thread runs the chunks itself, outside OpenMP: a parallel region of one thread still costs libgomp a team and a
// futex wake (on_team in gemm_team.h), and a cached decode step makes a thin product per weight per token.
template <class T, class TA>
[[gnu::always_inline]] inline void thin_impl(std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                                             const MatrixView<const TA>& a, const MatrixView<const TA>& b, T beta,
                                             const MatrixView<T>& c, int threads) {
  const std::int64_t chunks = (N + kColumns - 1) / kColumns;
  if (threads <= 1) {
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
      thin_chunk(M, K, alpha, a, b, beta, c, chunk * kColumns, std::min(kColumns, N - chunk * kColumns));
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
    thin_chunk(M, K, alpha, a, b, beta, c, chunk * kColumns, std::min(kColumns, N - chunk * kColumns));
}

}  // namespace

STEPFORMER_SIMD_CLONES void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                                      const MatrixView<const float>& a, const MatrixView<const float>& b, float beta,
                                      const MatrixView<float>& c, int threads) {
  thin_impl(M, N, K, alpha, a, b, beta, c, threads);
}
STEPFORMER_SIMD_CLONES void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, double alpha,
                                      const MatrixView<const double>& a, const MatrixView<const double>& b, double beta,
                                      const MatrixView<double>& c, int threads) {
  thin_impl(M, N, K, alpha, a, b, beta, c, threads);
}
STEPFORMER_SIMD_CLONES void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                                      const MatrixView<const bfloat16>& a, const MatrixView<const bfloat16>& b,
                                      float beta, const MatrixView<float>& c, int threads) {
  thin_impl(M, N, K, alpha, a, b, beta, c, threads);
}

STEPFORMER_SIMD_CLONES void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                                       const MatrixView<const float>& a, const MatrixView<const float>& b, float beta,
                                       const MatrixView<float>& c) {
  small_gemm_impl(M, N, K, alpha, a, b, beta, c);
}
void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const MatrixView<const double>& a,
                const MatrixView<const double>& b, double beta, const MatrixView<double>& c) {
  small_gemm_impl(M, N, K, alpha, a, b, beta, c);
}
STEPFORMER_SIMD_CLONES void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                                       const MatrixView<const bfloat16>& a, const MatrixView<const bfloat16>& b,
                                       float beta, const MatrixView<float>& c) {
  small_gemm_impl(M, N, K, alpha, a, b, beta, c);
}

}  // namespace stepformer::cpu
