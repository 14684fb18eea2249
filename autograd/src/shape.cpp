#include "autograd/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "autograd/errors.h"

namespace stepformer {

std::string to_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    if (d < 0) throw ShapeError(fmt::format("negative size in shape {}", to_string(s)));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw ResourceError(fmt::format("shape {} has more elements than int64 can count", to_string(s)));
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape strides(s.size());
  std::int64_t stride = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<std::int64_t>(s[i], 1);
  }
  return strides;
}

std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t ndim) {
  const std::int64_t n = std::max<std::int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  if (dim < -n || dim >= n)
    throw DimError(fmt::format("{}: dim {} is out of range for a tensor with {} dims (expected {} to {})", op, dim,
                               ndim, -n, n - 1));
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(fmt::format("{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {})", op, to_string(a),
                                   to_string(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace stepformer
