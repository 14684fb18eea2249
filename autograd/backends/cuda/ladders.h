#pragma once
// Kernel ladders, in the manner of llm.c's dev/cuda: for the GEMM, softmax, a row reduction and the transpose, the
// versions one writes on the way to the production kernel, each a kernel that is tested against the CPU
// (tests/cuda/test_cuda_backend.cpp) and whose comment says what it fixes over the version before. What each
// fix buys is measured by cuda-sim's profiler (sectors per request, bank conflicts, barriers):
// `build/cudasim-check/bin/cudasim_bench` prints the table of docs/09_cuda.md, "Kernel ladders", and
// tests/cuda/test_kernel_exercises.cpp holds every version to the counts its comment claims.
// The top rung of each ladder is the production kernel (softmax.cu, reduce.cu's block_reduce, transpose.cu).
#include "autograd/backend.h"

namespace stepformer::STEPFORMER_CUDA_NS {

inline constexpr int kGemmVersions = 3, kSoftmaxVersions = 3, kRowSumVersions = 4, kTransposeVersions = 3;

// c = alpha a b + beta c as the Backend's gemm takes it (float32 or float64), by version 1..3 (gemm.cu: 1 naive,
// 2 shared-memory tiles, 3 register blocking; the backend's gemm runs 3, and for bfloat16 operands v4 of
// gemm_tensor_cores.cu, tested through the backend oracle).
void gemm_version(int version, const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha,
                  double beta);

// out = softmax over the last dimension of contiguous `in` (float32 or float64), by version 1..3.
void softmax_version(int version, const TensorDesc& out, const TensorDesc& in);
// out[r] = the sum of row r of contiguous `in` [rows, C] (out has rows elements), by version 1..4.
void row_sum_version(int version, const TensorDesc& out, const TensorDesc& in);
// out [rows, cols] contiguous = `in`, a [rows, cols] view whose rows are adjacent in memory (strides 1, ld),
// as contiguous() of a transposed matrix asks, by version 1..3.
void transpose_version(int version, const TensorDesc& out, const TensorDesc& in);

}  // namespace stepformer::STEPFORMER_CUDA_NS
