#pragma once
// Walking strided operands on the CPU (dtype dispatch: ../dispatch.h).
#include <array>
#include <cstdint>
#include <exception>
#include <type_traits>

#include "../dispatch.h"
#include "autograd/backend.h"
#include "autograd/errors.h"

namespace stepformer::cpu {

// Below this many elements a loop runs on one thread: starting a parallel region costs more. Such a loop runs outside
// OpenMP altogether: a region with `if (false)` still costs libgomp a team and a futex wake at its end (on_team in
// gemm_team.h), and a decode step runs hundreds of small ops per token.
inline constexpr std::int64_t kParallelGrain = 1 << 15;

template <class T>
T* ptr(const TensorDesc& d) {
  return static_cast<T*>(d.data);
}

// body(i) for i in [0, n), over OpenMP threads when `parallel`. An exception must not leave an OpenMP
// region (that is std::terminate, a crash): the first one thrown is kept and rethrown after the loop.
// (The cross-entropy and RMSNorm rows are exercises: a workspace's unsolved stub throws from inside a row.)
template <class Body>
void parallel_for_rethrow(std::int64_t n, bool parallel, Body&& body) {
  if (!parallel) {  // outside OpenMP: an exception simply propagates
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
#pragma omp critical(stepformer_rethrow)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Visits every element of K operands that share shape(d[0]). The last dim is the inner loop:
// body(offsets, inner_strides, inner_count) handles one row, offsets in elements per operand.
// Rows are spread over OpenMP threads when the tensor is large (an exception in one is rethrown after the loop).
template <std::size_t K, class Body>
void for_each_row(const std::array<const TensorDesc*, K>& d, Body&& body) {
  const TensorDesc& s = *d[0];
  const std::int64_t n = s.numel();
  if (n == 0) return;
  if (s.ndim == 0) {
    std::array<std::int64_t, K> zero{}, unit{};
    body(zero, unit, std::int64_t{1});
    return;
  }
  const int last = s.ndim - 1;
  const std::int64_t inner = s.shape[last];
  const std::int64_t outer = n / inner;
  std::array<std::int64_t, K> step{};
  for (std::size_t k = 0; k < K; ++k) step[k] = d[k]->strides[last];
  const auto visit = [&](std::int64_t row) {
    std::array<std::int64_t, K> base{};
    std::int64_t r = row;
    for (int dim = last - 1; dim >= 0; --dim) {
      const std::int64_t i = r % s.shape[dim];
      r /= s.shape[dim];
      for (std::size_t k = 0; k < K; ++k) base[k] += i * d[k]->strides[dim];
    }
    body(base, step, inner);
  };
  parallel_for_rethrow(outer, n >= kParallelGrain, visit);
}

}  // namespace stepformer::cpu
