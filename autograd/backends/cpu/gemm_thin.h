#pragma once
// Thin products, A of a few rows (gemm_thin.cpp): gemm() sends them here instead of packing B.
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

}  // namespace stepformer::cpu
