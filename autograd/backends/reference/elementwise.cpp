// Elementwise kernels: one loop over the output's indices; each operand is read at the same index through
// its own strides (a stride of 0 is a broadcast). The formulas: ../elementwise_math.h.
#include "../elementwise_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::fill(const TensorDesc& out, double value) {
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    for_each_index(out, [&](const Index& i) { at<T>(out, i) = static_cast<T>(value); });
  });
}

void ReferenceBackend::unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) {
  dispatch_unary(op, out.dtype, in.dtype, alpha, "reference", [&](auto f, auto to, auto from) {
    using TO = decltype(to);
    using TI = decltype(from);
    for_each_index(out, [&](const Index& i) { at<TO>(out, i) = f(at<TI>(in, i)); });
  });
}

void ReferenceBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  dispatch_binary(op, a.dtype, "reference", [&](auto f, auto to, auto t) {
    using TO = decltype(to);
    using T = decltype(t);
    for_each_index(out, [&](const Index& i) { at<TO>(out, i) = f(at<T>(a, i), at<T>(b, i)); });
  });
}

void ReferenceBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    for_each_index(out, [&](const Index& i) { at<T>(out, i) = at<bool>(cond, i) ? at<T>(a, i) : at<T>(b, i); });
  });
}

void ReferenceBackend::accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) {
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("reference backend: cannot accumulate into a bool tensor");
    } else {
      for_each_index(out, [&](const Index& i) { at<T>(out, i) += static_cast<T>(alpha) * at<T>(in, i); });
    }
  });
}

}  // namespace stepformer::reference
