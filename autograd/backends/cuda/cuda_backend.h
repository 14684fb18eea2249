#pragma once
// The CUDA backend: every kernel of the Backend interface as a CUDA kernel plus the host code that picks
// its launch configuration. One file per kernel family, named as in backends/cpu/. Compiled twice:
// by nvcc as the `cuda` device and by g++ against cuda-sim as the `cuda-sim` device (compat.cuh).
#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/backend.h"

namespace stepformer::STEPFORMER_CUDA_NS {

class CudaBackend final : public Backend {
 public:
  Device device() const override;

  // memory.cu
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }

  // elementwise.cu
  void fill(const TensorDesc& out, double value) override;
  void unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) override;
  void binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) override;
  void where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) override;
  void accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) override;
  // transpose.cu: a copy into a contiguous `out` from an `in` whose last two dimensions are swapped in
  // memory, through shared-memory tiles; false (nothing done) for any other layout.
  bool transpose_copy(const TensorDesc& out, const TensorDesc& in);

  // reduce.cu
  void reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) override;

  // gemm.cu: gemm() runs the best version; gemm_version() runs one by number, for tests and benchmarks
  // (1 naive, 2 shared-memory tiles, 3 register blocking).
  void gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) override;
  void gemm_version(int version, const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha,
                    double beta);

  // softmax.cu
  void softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) override;
  void softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                        bool log) override;

  // norm.cu
  void layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd, const TensorDesc& x,
                          const TensorDesc& gamma, const TensorDesc& beta, double eps) override;
  void layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                           const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean, const TensorDesc& rstd,
                           const TensorDesc& gamma) override;

  // embedding.cu
  std::int64_t gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids) override;
  void scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                        std::int64_t skip_id) override;

  // loss.cu
  std::int64_t cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,
                                     const TensorDesc& targets, std::int64_t ignore_index, double smoothing) override;
  void cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,
                              const TensorDesc& targets, const TensorDesc& grad_loss, std::int64_t ignore_index,
                              double smoothing) override;

  // random.cu
  void random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                   std::uint64_t offset) override;

  // optim.cu
  void adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                   const AdamConfig& cfg) override;

  // memory.cu: a device int64 that kernels lower with atomicMin to report the first bad index (or -1).
  long long* first_bad_index_slot();  // long long: the type CUDA's atomicMin takes
  std::int64_t read_first_bad_index();

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
  std::mutex cache_mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // cuda: size -> free device blocks
  long long* bad_index_ = nullptr;
};

CudaBackend& backend();  // the one instance (memory.cu)

}  // namespace stepformer::STEPFORMER_CUDA_NS
