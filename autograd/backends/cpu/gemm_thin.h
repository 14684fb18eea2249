#pragma once
// Products gemm() computes without packing (gemm_thin.cpp): thin ones, A of a few rows, and small ones.
#include "gemm.h"

namespace stepformer::cpu {

// The most rows of A a thin product has: a decode step's one token (or a few sequences' tokens).
inline constexpr std::int64_t kThinRows = 4;

// C[M, N] = alpha * A[M, K] @ B[K, N] + beta * C for M <= kThinRows, on `threads` threads (at least 1).
void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const MatrixView<const float>& a,
               const MatrixView<const float>& b, float beta, const MatrixView<float>& c, int threads);
void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const MatrixView<const double>& a,
               const MatrixView<const double>& b, double beta, const MatrixView<double>& c, int threads);
void thin_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const MatrixView<const bfloat16>& a,
               const MatrixView<const bfloat16>& b, float beta, const MatrixView<float>& c, int threads);

// Small products (attention's per-head [16 x 32] @ [32 x 16]) cost more to pack than to compute: they run
// row by row, i-k-j, accumulating a row of C in a local buffer. Multi-versioned like the other kernels.
inline constexpr std::int64_t kSmallWork = 1 << 16, kSmallN = 256;  // the most M N K, and the most N
void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const MatrixView<const float>& a,
                const MatrixView<const float>& b, float beta, const MatrixView<float>& c);
void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const MatrixView<const double>& a,
                const MatrixView<const double>& b, double beta, const MatrixView<double>& c);
void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const MatrixView<const bfloat16>& a,
                const MatrixView<const bfloat16>& b, float beta, const MatrixView<float>& c);

}  // namespace stepformer::cpu
