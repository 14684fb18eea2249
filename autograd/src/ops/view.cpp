// Views share storage and change only shape, strides and offset; their backward maps the gradient back
// through the same window. contiguous() and cat copy.
#include <algorithm>
#include <numeric>
#include <optional>

#include "common.h"

namespace stepformer {
using detail::check_operands;
using detail::make_view;

namespace {

Shape infer_shape(const char* op, const Tensor& a, Shape shape) {
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer) throw ShapeError(fmt::format("{}: only one size may be -1, got {}", op, to_string(shape)));
      infer = i;
    } else if (shape[i] < 0) {
      throw ShapeError(fmt::format("{}: invalid size {} in {}", op, shape[i], to_string(shape)));
    } else {
      known *= shape[i];
    }
  }
  if (infer && known != 0 && a.numel() % known == 0) shape[*infer] = a.numel() / known;
  if ((infer && (known == 0 || a.numel() % known != 0)) || numel(shape) != a.numel())
    throw ShapeError(fmt::format("{}: shape {} is invalid for an input of shape {} ({} elements)", op, to_string(shape),
                                 to_string(a.shape()), a.numel()));
  return shape;
}

// Strides that let `shape` view the same elements as (old_shape, old_strides) without a copy, if any:
// runs of old dims that are contiguous with each other ("chunks") may be split or merged freely;
// a chunk boundary must line up with a boundary in the new shape (as PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape) {
  if (old_shape.empty() || numel(old_shape) == 0) return contiguous_strides(shape);
  Shape strides(shape.size());
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_stride = old_strides.back(), chunk_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    chunk_numel *= old_shape[static_cast<std::size_t>(d)];
    const bool chunk_ends = d == 0 || (old_shape[static_cast<std::size_t>(d - 1)] != 1 &&
                                       old_strides[static_cast<std::size_t>(d - 1)] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < chunk_numel || shape[static_cast<std::size_t>(view_d)] == 1)) {
      strides[static_cast<std::size_t>(view_d)] = view_numel * chunk_stride;
      view_numel *= shape[static_cast<std::size_t>(view_d)];
      --view_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[static_cast<std::size_t>(d - 1)];
      chunk_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

Tensor record_view(Tensor out, const Tensor& a) {
  record(Op::view, out, {a}, [s = a.shape()](const Tensor& g) -> Gradients { return {reshape(g, s)}; });
  return out;
}

}  // namespace

Tensor view(const Tensor& a, const Shape& requested) {
  check_operands("view", {&a});
  const Shape shape = infer_shape("view", a, requested);
  const auto strides =
      a.is_contiguous() ? std::optional<Shape>(contiguous_strides(shape)) : view_strides(a.shape(), a.strides(), shape);
  if (!strides)
    throw ShapeError(
        fmt::format("view: a tensor of shape {} and strides {} cannot be viewed as {} without a copy "
                    "(it is not contiguous); use reshape(), or contiguous() first",
                    to_string(a.shape()), to_string(a.strides()), to_string(shape)));
  return record_view(make_view(a, shape, *strides, a.offset()), a);
}

Tensor reshape(const Tensor& a, const Shape& requested) {
  check_operands("reshape", {&a});
  const Shape shape = infer_shape("reshape", a, requested);
  if (a.is_contiguous() || view_strides(a.shape(), a.strides(), shape)) return view(a, shape);
  return view(contiguous(a), shape);
}

Tensor permute(const Tensor& a, const std::vector<std::int64_t>& dims) {
  check_operands("permute", {&a});
  if (static_cast<std::int64_t>(dims.size()) != a.dim())
    throw DimError(fmt::format("permute: {} dims given for a tensor of shape {}", dims.size(), to_string(a.shape())));
  Shape shape(dims.size()), strides(dims.size());
  std::vector<std::int64_t> inverse(dims.size(), -1);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(wrap_dim("permute", dims[i], a.dim()));
    if (inverse[d] != -1) throw DimError(fmt::format("permute: dim {} is repeated in {}", dims[i], to_string(dims)));
    inverse[d] = static_cast<std::int64_t>(i);
    shape[i] = a.shape()[d];
    strides[i] = a.strides()[d];
  }
  Tensor out = make_view(a, shape, strides, a.offset());
  record(Op::permute, out, {a}, [inverse](const Tensor& g) -> Gradients { return {permute(g, inverse)}; });
  return out;
}

Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1) {
  check_operands("transpose", {&a});
  std::vector<std::int64_t> order(static_cast<std::size_t>(a.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<std::size_t>(wrap_dim("transpose", dim0, a.dim()))],
            order[static_cast<std::size_t>(wrap_dim("transpose", dim1, a.dim()))]);
  return permute(a, order);
}

Tensor narrow(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t length) {
  check_operands("narrow", {&a});
  const auto d = static_cast<std::size_t>(wrap_dim("narrow", dim, a.dim()));
  const std::int64_t size = a.dim() == 0 ? 1 : a.shape()[d];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size)
    throw IndexError(fmt::format("narrow: window start {} length {} is outside dim {} of size {} (shape {})", start,
                                 length, dim, size, to_string(a.shape())));
  return slice(a, dim, start, start + length, 1);
}

Tensor slice(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  check_operands("slice", {&a});
  if (a.dim() == 0) throw DimError("slice: cannot slice a 0-dim tensor");
  if (step <= 0) throw ValueError(fmt::format("slice: step must be positive, got {}", step));
  const auto d = static_cast<std::size_t>(wrap_dim("slice", dim, a.dim()));
  const std::int64_t size = a.shape()[d];
  auto clamp = [size](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape shape = a.shape(), strides = a.strides();
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor out = make_view(a, shape, strides, a.offset() + start * a.strides()[d]);
  const auto di = static_cast<std::int64_t>(d);
  // The gradient of a window: zeros of the input's shape with g written into the window.
  record(Op::narrow, out, {a}, [s = a.shape(), di, start, end, step](const Tensor& g) -> Gradients {
    Tensor full_grad = zeros(s, {g.dtype(), g.device(), false});
    Tensor window = slice(full_grad, di, start, end, step);
    copy_(window, g);
    return {full_grad};
  });
  return out;
}

Tensor squeeze(const Tensor& a, std::int64_t dim) {
  check_operands("squeeze", {&a});
  if (a.dim() == 0) return a;
  const auto d = static_cast<std::size_t>(wrap_dim("squeeze", dim, a.dim()));
  if (a.shape()[d] != 1) return a;  // as torch.squeeze: a dim of size != 1 is left alone
  Shape shape = a.shape(), strides = a.strides();
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
  return record_view(make_view(a, shape, strides, a.offset()), a);
}

Tensor unsqueeze(const Tensor& a, std::int64_t dim) {
  check_operands("unsqueeze", {&a});
  const auto d = static_cast<std::size_t>(wrap_dim("unsqueeze", dim, a.dim() + 1));
  Shape shape = a.shape(), strides = a.strides();
  const std::int64_t stride = d < shape.size() ? shape[d] * strides[d] : 1;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
  return record_view(make_view(a, shape, strides, a.offset()), a);
}

Tensor expand(const Tensor& a, const Shape& requested) {
  check_operands("expand", {&a});
  if (requested.size() < a.shape().size())
    throw ShapeError(
        fmt::format("expand: cannot expand shape {} to fewer dims {}", to_string(a.shape()), to_string(requested)));
  const std::size_t lead = requested.size() - a.shape().size();
  Shape shape = requested, strides(requested.size(), 0);
  for (std::size_t i = lead; i < requested.size(); ++i) {
    const std::int64_t have = a.shape()[i - lead];
    if (shape[i] == -1) shape[i] = have;
    if (have == shape[i]) {
      strides[i] = a.strides()[i - lead];
    } else if (have != 1) {
      throw ShapeError(fmt::format("expand: shape {} cannot be expanded to {} (dim {}: {} is not 1)",
                                   to_string(a.shape()), to_string(requested), i, have));
    }
  }
  if (shape == a.shape()) return a;
  Tensor out = make_view(a, shape, strides, a.offset());
  record(Op::expand, out, {a}, [s = a.shape()](const Tensor& g) -> Gradients { return {sum_to(g, s)}; });
  return out;
}

Tensor contiguous(const Tensor& a) {
  check_operands("contiguous", {&a});
  if (a.is_contiguous()) return a;
  Tensor out = detail::empty_as(a, a.shape());
  a.backend().unary(UnaryOp::copy, out.desc(), a.desc(), 0.0);
  record(Op::contiguous, out, {a}, [](const Tensor& g) -> Gradients { return {g}; });
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  if (tensors.empty()) throw ValueError("cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  const auto d = static_cast<std::size_t>(wrap_dim("cat", dim, first.dim()));
  if (first.dim() == 0) throw DimError("cat: cannot concatenate 0-dim tensors; use stack");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& t : tensors) {
    check_operands("cat", {&first, &t});
    Shape a = t.shape(), b = first.shape();
    if (a.size() == b.size()) a[d] = b[d] = 0;
    if (a != b)
      throw ShapeError(fmt::format("cat: shapes {} and {} differ outside dim {}", to_string(first.shape()),
                                   to_string(t.shape()), dim));
    shape[d] += t.shape()[d];
  }
  Tensor out = detail::empty_as(first, shape);
  std::vector<std::int64_t> starts;  // where each input begins along dim d
  std::int64_t start = 0;
  const auto di = static_cast<std::int64_t>(d);
  for (const Tensor& t : tensors) {
    const std::int64_t len = t.shape()[d];
    if (len > 0) {
      NoGradGuard no_grad;
      Tensor window = narrow(out, di, start, len);
      copy_(window, t);
    }
    starts.push_back(start);
    start += len;
  }
  record(Op::cat, out, tensors, [di, starts, end = start](const Tensor& g) -> Gradients {
    Gradients grads;
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const std::int64_t next = i + 1 < starts.size() ? starts[i + 1] : end;
      grads.push_back(narrow(g, di, starts[i], next - starts[i]));
    }
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  if (tensors.empty()) throw ValueError("stack: expected at least one tensor");
  const std::int64_t d = wrap_dim("stack", dim, tensors.front().dim() + 1);
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    if (t.shape() != tensors.front().shape())
      throw ShapeError(fmt::format("stack: all tensors need the same shape, got {} and {}",
                                   to_string(tensors.front().shape()), to_string(t.shape())));
    parts.push_back(unsqueeze(t, d));
  }
  return cat(parts, d);
}

}  // namespace stepformer
