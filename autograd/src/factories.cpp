// The factories (autograd/tensor.h): empty, full, zeros, ones, scalar, arange, from_vector and the *_like.
// Each allocates through the backend of its device and fills through it; requires_grad is set last, so the
// fill is not recorded.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "autograd/errors.h"
#include "autograd/tensor.h"
#include "host_elements.h"
#include "ops/common.h"

namespace stepformer {

using detail::store_from_double;

Tensor empty(const Shape& shape, Options o) {
  detail::check_ndim("empty", shape);
  const std::int64_t n = numel(shape);
  const std::size_t es = element_size(o.dtype);
  if (n > static_cast<std::int64_t>(SIZE_MAX / 2 / es))
    throw ResourceError(fmt::format("empty: shape {} needs more memory than can be addressed", to_string(shape)));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(backend_for(o.device), static_cast<std::size_t>(n) * es);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = o.dtype;
  impl->device = o.device;
  Tensor t(std::move(impl));
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor full(const Shape& shape, double value, Options o) {
  detail::check_number_fits("full", value, o.dtype, shape);
  const bool rg = o.requires_grad;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  t.backend().fill(t.desc(), value);
  if (rg) t.set_requires_grad(true);
  return t;
}
Tensor zeros(const Shape& shape, Options o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, Options o) { return full(shape, 1.0, o); }
Tensor scalar(double value, Options o) { return full({}, value, o); }

Tensor arange(std::int64_t end, Options o) { return arange(0, end, 1, o); }
Tensor arange(std::int64_t start, std::int64_t end, std::int64_t step, Options o) {
  if (step == 0) throw ValueError("arange: step must not be 0");
  const std::int64_t n = std::max<std::int64_t>(0, (end - start + step - (step > 0 ? 1 : -1)) / step);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>(start + i * step);
  return from_vector(v, {n}, o);
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, Options o) {
  if (static_cast<std::int64_t>(values.size()) != numel(shape))
    throw ShapeError(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                                 to_string(shape), numel(shape)));
  const bool rg = o.requires_grad;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  const std::size_t es = element_size(o.dtype);
  std::vector<unsigned char> raw(values.size() * es);
  for (std::size_t i = 0; i < values.size(); ++i) store_from_double(&raw[i * es], o.dtype, values[i]);
  if (!raw.empty()) t.backend().copy_from_host(t.desc().data, raw.data(), raw.size());
  if (rg) t.set_requires_grad(true);
  return t;
}
Tensor from_vector(const std::vector<float>& values, const Shape& shape, Options o) {
  return from_vector(std::vector<double>(values.begin(), values.end()), shape, o);
}
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape, Options o) {
  // int64 ids beyond 2^53 would not survive a detour through double.
  if (o.dtype == DType::int64) {
    if (static_cast<std::int64_t>(values.size()) != numel(shape))
      throw ShapeError(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                                   to_string(shape), numel(shape)));
    Tensor t = empty(shape, o);
    if (!values.empty()) t.backend().copy_from_host(t.desc().data, values.data(), values.size() * 8);
    return t;
  }
  std::vector<double> d(values.begin(), values.end());
  return from_vector(d, shape, o);
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device(), false}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device(), false}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device(), false}); }

}  // namespace stepformer
