#pragma once
// Shapes and strides (in elements, not bytes), and the broadcasting rule of NumPy and PyTorch:
// align shapes at the right; two sizes fit when equal or when one of them is 1.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace stepformer {

using Shape = std::vector<std::int64_t>;

std::string to_string(const Shape& s);                                       // "[2, 3]"
std::int64_t numel(const Shape& s);                                          // throws ResourceError on overflow
Shape contiguous_strides(const Shape& s);                                    // row-major
std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t ndim);  // -1 -> ndim-1; DimError
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);      // ShapeError names both

}  // namespace stepformer
