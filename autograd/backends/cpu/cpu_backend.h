#pragma once
// The CPU backend: every kernel of the Backend interface, simple and correct, OpenMP on the obvious
// loops. One file per kernel family; the CUDA backend uses the same file names.
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/backend.h"

namespace stepformer::cpu {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return kCPU; }

  // memory.cpp
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }
  void release_cache();  // gives every cached free block back to the system

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
  std::mutex cache_mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // size class -> free blocks
  std::size_t cached_bytes_ = 0;
};

}  // namespace stepformer::cpu
