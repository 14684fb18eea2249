#pragma once
// Walking a strided tensor one element at a time: the index of each element, in row-major order, and its
// place in memory (the sum of index times stride over the dims). Nothing here is fast; all of it is plain.
#include <cstdint>

#include "../dispatch.h"
#include "autograd/backend.h"

namespace stepformer::reference {

struct Index {
  std::int64_t i[kMaxDims] = {};
};

// Calls f(index) for every index of d's shape, the last dim moving fastest.
template <class F>
void for_each_index(const TensorDesc& d, F&& f) {
  Index idx;
  const std::int64_t n = d.numel();
  for (std::int64_t count = 0; count < n; ++count) {
    f(idx);
    for (int k = d.ndim - 1; k >= 0; --k) {  // the next index: add one to the last dim, carrying
      if (++idx.i[k] < d.shape[k]) break;
      idx.i[k] = 0;
    }
  }
}

// The element of d at `idx` (a stride of 0 makes a dim a broadcast: every index reads the same element).
template <class T>
T& at(const TensorDesc& d, const Index& idx) {
  std::int64_t offset = 0;
  for (int k = 0; k < d.ndim; ++k) offset += idx.i[k] * d.strides[k];
  return static_cast<T*>(d.data)[offset];
}

// Element i of a contiguous tensor.
template <class T>
T& flat(const TensorDesc& d, std::int64_t i) {
  return static_cast<T*>(d.data)[i];
}

// Row kernels: a contiguous tensor as rows of its last dim.
inline std::int64_t row_length(const TensorDesc& d) { return d.ndim == 0 ? 1 : d.shape[d.ndim - 1]; }
inline std::int64_t row_count(const TensorDesc& d) {
  const std::int64_t n = row_length(d);
  return n == 0 ? 0 : d.numel() / n;
}

}  // namespace stepformer::reference
