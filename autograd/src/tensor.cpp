// Tensor and Storage: the handle, its gradient slot and hooks, and element access. The factories that make
// tensors are in factories.cpp. Element memory is touched only through the backend.
#include "autograd/tensor.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "autograd/engine.h"
#include "autograd/errors.h"
#include "autograd/ops.h"
#include "host_elements.h"
#include "ops/common.h"

namespace stepformer {

using detail::load_as;
using detail::store_from_double;

namespace {
std::atomic<std::uint64_t> g_storages_made{0};
}  // namespace
Storage::Storage(Backend& b, std::size_t n) : backend(&b), data(b.allocate(n)), bytes(n), serial(g_storages_made++) {}
std::uint64_t Storage::next_serial() { return g_storages_made.load(); }
Storage::~Storage() { backend->deallocate(data, bytes); }

namespace {
thread_local LeafObserver* g_leaf_observer = nullptr;  // the innermost LeafObserver on this thread

const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw Error("use of an undefined tensor (default-constructed Tensor)");
  return *impl;
}
}  // namespace

const Shape& Tensor::shape() const { return checked(impl_).shape; }
std::int64_t Tensor::dim() const { return static_cast<std::int64_t>(shape().size()); }
std::int64_t Tensor::size(std::int64_t d) const { return shape()[wrap_dim("size", d, dim())]; }
std::int64_t Tensor::numel() const { return stepformer::numel(shape()); }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
std::int64_t Tensor::offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).device; }
Backend& Tensor::backend() const { return *checked(impl_).storage->backend; }
std::uint64_t Tensor::version() const { return checked(impl_).storage->version; }
void Tensor::bump_version() const { ++checked(impl_).storage->version; }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  const Shape& st = strides();
  std::int64_t expected = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] != 1 && st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }
bool Tensor::is_leaf() const { return checked(impl_).grad_fn == nullptr; }
Tensor Tensor::grad() const { return checked(impl_).grad; }
void Tensor::zero_grad() {
  checked(impl_);  // an undefined tensor is an Error, not a null dereference
  impl_->grad = Tensor();
}
std::uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) {
  checked(impl_);
  TensorImpl& impl = *impl_;
  if (!impl.requires_grad || impl.grad_fn)
    throw AutogradError(
        "register_post_accumulate_grad_hook: only a leaf that requires grad has an accumulated gradient");
  static std::atomic<std::uint64_t> next_handle{1};
  const std::uint64_t handle = next_handle++;
  impl.post_accumulate_hooks.emplace_back(handle, std::move(hook));
  return handle;
}
void Tensor::remove_post_accumulate_grad_hook(std::uint64_t handle) {
  checked(impl_);
  std::erase_if(impl_->post_accumulate_hooks, [handle](const auto& h) { return h.first == handle; });
}
const std::shared_ptr<Node>& Tensor::grad_fn() const { return checked(impl_).grad_fn; }
const std::string& Tensor::name() const { return checked(impl_).name; }

Tensor& Tensor::set_requires_grad(bool on) {
  if (!is_leaf())
    throw AutogradError(
        fmt::format("set_requires_grad: only leaves can change requires_grad; this tensor was made by '{}' "
                    "(use detach() for a new leaf)",
                    op_info(grad_fn()->op).name));
  if (on && !is_floating(dtype()))
    throw DTypeError(
        fmt::format("set_requires_grad: only floating tensors can require grad, got {}", dtype_name(dtype())));
  if (on && !impl_->requires_grad)
    for (LeafObserver* o = g_leaf_observer; o != nullptr; o = o->previous_) o->seen_.emplace_back(impl_, impl_->shape);
  impl_->requires_grad = on;
  return *this;
}

LeafObserver::LeafObserver() : previous_(g_leaf_observer) { g_leaf_observer = this; }
LeafObserver::~LeafObserver() { g_leaf_observer = previous_; }
std::vector<LeafObserver::Record> LeafObserver::records() const {
  std::vector<Record> out;
  for (const auto& [weak, shape] : seen_) {
    auto impl = weak.lock();
    out.push_back({impl ? Tensor(std::move(impl)) : Tensor(), shape});
  }
  return out;
}

void Tensor::set_data(const Tensor& src) {
  TensorImpl& self = const_cast<TensorImpl&>(checked(impl_));
  const TensorImpl& other = checked(src.impl_);
  if (!is_leaf()) throw AutogradError("set_data: only a leaf's data can be replaced (this tensor was made by an op)");
  self.storage = other.storage;
  self.shape = other.shape;
  self.strides = other.strides;
  self.offset = other.offset;
  self.dtype = other.dtype;
  self.device = other.device;
  self.grad = Tensor();
  self.grad_accumulator = nullptr;  // a graph recorded before now refers to the old data
}

Tensor& Tensor::set_name(std::string n) {
  checked(impl_);
  impl_->name = std::move(n);
  return *this;
}

Tensor Tensor::detach() const {
  const TensorImpl& s = checked(impl_);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = s.storage;
  impl->shape = s.shape;
  impl->strides = s.strides;
  impl->offset = s.offset;
  impl->dtype = s.dtype;
  impl->device = s.device;
  impl->name = s.name;
  return Tensor(std::move(impl));
}

TensorDesc Tensor::desc() const {
  const TensorImpl& s = checked(impl_);
  detail::check_backward_read(*this);
  TensorDesc d;
  d.data = static_cast<char*>(s.storage->data) + s.offset * static_cast<std::int64_t>(element_size(s.dtype));
  d.dtype = s.dtype;
  d.ndim = static_cast<int>(s.shape.size());
  for (int i = 0; i < d.ndim; ++i) {
    d.shape[i] = s.shape[i];
    d.strides[i] = s.strides[i];
  }
  return d;
}

// --- element access -----------------------------------------------------------------------------------

namespace {
std::int64_t element_offset(const Tensor& t, const Shape& index, const char* op) {
  if (static_cast<std::int64_t>(index.size()) != t.dim())
    throw IndexError(fmt::format("{}: index {} has {} entries, tensor of shape {} has {} dims", op, to_string(index),
                                 index.size(), to_string(t.shape()), t.dim()));
  std::int64_t off = t.offset();
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= t.shape()[d])
      throw IndexError(
          fmt::format("{}: index {} is out of range for shape {}", op, to_string(index), to_string(t.shape())));
    off += index[d] * t.strides()[d];
  }
  return off;
}

}  // namespace

double Tensor::at(const Shape& index) const {
  const std::int64_t off = element_offset(*this, index, "at");
  detail::check_backward_read(*this);
  const std::size_t es = element_size(dtype());
  unsigned char buf[8];
  backend().copy_to_host(buf, static_cast<char*>(impl_->storage->data) + off * static_cast<std::int64_t>(es), es);
  return load_as<double>(buf, dtype());
}

void Tensor::set(const Shape& index, double value) {
  const std::int64_t off = element_offset(*this, index, "set");
  const std::size_t es = element_size(dtype());
  unsigned char buf[8];
  store_from_double(buf, dtype(), value);
  backend().copy_from_host(static_cast<char*>(impl_->storage->data) + off * static_cast<std::int64_t>(es), buf, es);
  bump_version();
}

double Tensor::item() const {
  if (numel() != 1)
    throw ShapeError(fmt::format("item: expected a tensor with one element, got shape {}", to_string(shape())));
  return at(Shape(shape().size(), 0));
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor c = contiguous(*this);
  const std::size_t es = element_size(dtype());
  std::vector<unsigned char> raw(static_cast<std::size_t>(c.numel()) * es);
  if (!raw.empty()) c.backend().copy_to_host(raw.data(), c.desc().data, raw.size());
  std::vector<T> out(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_as<T>(&raw[i * es], dtype());
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

std::size_t bytes_in_use(Device device) { return backend_for(device).bytes_in_use(); }
std::size_t host_waits(Device device) { return backend_for(device).host_waits(); }
std::size_t kernel_launches(Device device) { return backend_for(device).kernel_launches(); }
std::size_t driver_allocations(Device device) { return backend_for(device).driver_allocations(); }

}  // namespace stepformer
