#pragma once
// Kernel ladders, in the manner of llm.c's dev/cuda: for the GEMM, softmax, a row reduction and the transpose, the
// versions one writes on the way to the production kernel, each a kernel that is tested against the CPU
// (tests/cuda/test_cuda_backend.cpp) and whose comment says what it fixes over the version before. What each
// fix buys is measured by cuda-sim's profiler (sectors per request, bank conflicts, barriers) on one table of
// problems, tests/cuda/ladder_problems.h: tests/cuda/test_ladders.cpp holds every version to the counts its comment
// claims, and `build/cudasim-check/bin/ladder_bench` prints the tables of docs/09_cuda.md, "Kernel ladders" (on a
// GPU, `ladder_bench --device cuda` times every version instead).
// One convention for every family: the versions below the top live in `<family>_ladder.cu` (gemm_ladder.cu,
// softmax_ladder.cu, row_sum_ladder.cu, transpose_ladder.cu), each under a header saying what it fixes; the top
// rung is the production kernel, in its own file (gemm.cu's v3 for float32 and float64 and gemm_pipelined.cu's
// v5 for bfloat16, softmax.cu, reduce.cu's block_reduce, transpose.cu); the bfloat16 GEMM's v4
// (gemm_tensor_cores.cu), the tensor cores fed plainly, keeps a file of its own too. Each count below is the number
// of versions `<family>_version` runs; tests/cuda/test_cuda_backend.cpp holds it to that.
#include "autograd/backend.h"

namespace stepformer::STEPFORMER_CUDA_NS {

inline constexpr int kGemmVersions = 6, kSoftmaxVersions = 3, kRowSumVersions = 4, kTransposeVersions = 3;

// c = alpha a b + beta c as the Backend's gemm takes it, by version 1..6: 1 naive, 2 shared-memory tiles,
// 3 register blocking (float32 or float64 operands), 4 the tensor cores (bfloat16 operands, a float32 or bfloat16
// c), 5 the tensor cores fed by ldmatrix and a cp.async pipeline (the same operands as 4), 6 Hopper's wgmma on
// those stages (the same operands; on a GPU, a DeviceError unless it is a compute capability 9.0 one and the
// library has sm_90a code). The backend's gemm runs 3, and 5 for bfloat16 operands. A version given operands it
// does not multiply is a DTypeError.
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
