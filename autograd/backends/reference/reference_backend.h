#pragma once
// The reference backend: every kernel of the Backend interface (autograd/backend.h) as the plainest loop
// that is correct. No intrinsics, no OpenMP, no blocking, no multi-versioning; libm for every function;
// floating sums accumulated in double. Read it first: a kernel here is the definition of what the fast
// CPU kernel (backends/cpu) and the CUDA kernel (backends/cuda) of the same name must compute, and the
// tests hold both to it (tests/autograd/test_backend_oracle.cpp).
//
// It is also a device, `reference` (`--device reference` on every demo): the whole Transformer runs on
// these loops, slowly, and a debugger steps through kernels a learner can read in one screen each.
// Host memory, no caching allocator: a freed block goes straight back to the system.
#include <atomic>

#include "autograd/backend.h"

namespace stepformer::reference {

class ReferenceBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceType::reference, 0}; }

  // memory.cpp
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }

  // elementwise.cpp
  void fill(const TensorDesc& out, double value) override;
  void unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) override;
  void binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) override;
  void where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) override;
  void accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) override;

  // reduce.cpp
  void reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) override;

  // gemm.cpp
  void gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) override;

  // softmax.cpp
  void softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) override;
  void softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                        bool log) override;

  // norm.cpp
  void layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd, const TensorDesc& x,
                          const TensorDesc& gamma, const TensorDesc& beta, double eps) override;
  void layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                           const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean, const TensorDesc& rstd,
                           const TensorDesc& gamma) override;

  // embedding.cpp
  std::int64_t gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids) override;
  void scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                        std::int64_t skip_id) override;

  // loss.cpp
  std::int64_t cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,
                                     const TensorDesc& targets, std::int64_t ignore_index, double smoothing) override;
  void cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,
                              const TensorDesc& targets, const TensorDesc& grad_loss, std::int64_t ignore_index,
                              double smoothing) override;

  // random.cpp
  void random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                   std::uint64_t offset) override;

  // optim.cpp
  void adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                   const AdamConfig& cfg) override;

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
};

}  // namespace stepformer::reference
