#pragma once
// What the CUDA GEMM kernels share (gemm_ladder.cu: v1, v2; gemm.cu: v3; gemm_tensor_cores.cu: v4;
// gemm_pipelined.cu: v5; gemm_wgmma.cu: v6; gemv.cu: one row): the problem read off the operands' descriptors, the
// batch walk, and the store of one element of c.
#include <algorithm>
#include <string>

#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

struct Problem {
  TensorDesc c, a, b;
  std::int64_t m, n, k, batches;
  std::int64_t lda_m, lda_k, ldb_k, ldb_n, ldc_m, ldc_n;  // the strides of the matrix dims
};

inline Problem problem(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b) {
  const int nd = c.ndim;
  Problem p{c, a, b, c.shape[nd - 2], c.shape[nd - 1], a.shape[nd - 1], 1, 0, 0, 0, 0, 0, 0};
  for (int d = 0; d < nd - 2; ++d) p.batches *= c.shape[d];
  p.lda_m = a.strides[nd - 2], p.lda_k = a.strides[nd - 1];
  p.ldb_k = b.strides[nd - 2], p.ldb_n = b.strides[nd - 1];
  p.ldc_m = c.strides[nd - 2], p.ldc_n = c.strides[nd - 1];
  return p;
}

// Batches: blockIdx.z walks the batch, grid-stride past the 65535 blocks a grid's z may hold (batch_grid).
inline unsigned batch_grid(const Problem& p) { return static_cast<unsigned>(std::min<std::int64_t>(p.batches, 65535)); }

// Batch z's offsets in c, a and b through their batch strides (stride 0 where an operand broadcasts).
__device__ __forceinline__ void batch_offsets(const Problem& p, std::int64_t z, std::int64_t& oc, std::int64_t& oa,
                                              std::int64_t& ob) {
  oc = oa = ob = 0;
  for (int d = p.c.ndim - 3; d >= 0; --d) {
    const std::int64_t i = z % p.c.shape[d];
    z /= p.c.shape[d];
    oc += i * p.c.strides[d];
    oa += i * p.a.strides[d];
    ob += i * p.b.strides[d];
  }
}

// c = alpha acc + beta c; beta == 0 never reads c (BLAS: it may hold garbage; fresh memory is NaN-poisoned under
// cuda-sim, so a read shows).
template <class T, class TC>
__device__ __forceinline__ void store(TC* c, T acc, T alpha, T beta) {
  *c = static_cast<TC>(beta == T(0) ? alpha * acc : alpha * acc + beta * static_cast<T>(*c));
}

// The tensor-core GEMMs' operands (v4, v5, v6): bfloat16 a and b, a float32 or bfloat16 c; otherwise a DTypeError
// that names the version and the three dtypes.
inline void check_bf16_operands(const char* version, const Problem& p, DType c_dtype) {
  if (p.a.dtype != DType::bfloat16 || p.b.dtype != DType::bfloat16 ||
      (c_dtype != DType::float32 && c_dtype != DType::bfloat16))
    throw DTypeError(std::string("cuda gemm ") + version +
                     ": needs bfloat16 operands and a float32 or bfloat16 product, got " +
                     std::string(dtype_name(p.a.dtype)) + ", " + std::string(dtype_name(p.b.dtype)) + " and " +
                     std::string(dtype_name(c_dtype)));
}

inline unsigned tiles(std::int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

// Whether an operand's data and batch strides allow 16-byte accesses of bfloat16 (8 values) at every batch.
inline bool batches_16_byte_aligned(const TensorDesc& d) {
  bool aligned = reinterpret_cast<std::uintptr_t>(d.data) % 16 == 0;
  for (int i = 0; i < d.ndim - 2; ++i) aligned = aligned && d.strides[i] % 8 == 0;
  return aligned;
}

// One row of c (gemv.cu): a warp per element of c, for a b contiguous along K. gemv_fits says whether it applies.
bool gemv_fits(const Problem& p);
void gemv(const Problem& p, DType c_dtype, DType ab_dtype, double alpha, double beta);
// v3 (gemm.cu): register blocking; float32 or float64 operands, or bfloat16 ones widened as they are staged.
void gemm_register_blocked(const Problem& p, DType c_dtype, DType ab_dtype, double alpha, double beta);
// v4 (gemm_tensor_cores.cu): bfloat16 a and b, a float32 or bfloat16 c, on the tensor cores.
void gemm_tensor_cores(const Problem& p, DType c_dtype, double alpha, double beta);
// v5 (gemm_pipelined.cu): v4 with ldmatrix, a three-stage cp.async pipeline and 64 x 64 of c per warp, in tiles of
// kPipelinedTile x kPipelinedTile of c.
constexpr int kPipelinedTile = 128;
void gemm_pipelined(const Problem& p, DType c_dtype, double alpha, double beta);
// v6 (gemm_wgmma.cu): Hopper's wgmma reading both operands from shared memory, fed by v5's cp.async stages; a
// DeviceError where it cannot run (wgmma_available, compat.cuh).
void gemm_wgmma(const Problem& p, DType c_dtype, double alpha, double beta);

}  // namespace stepformer::STEPFORMER_CUDA_NS
