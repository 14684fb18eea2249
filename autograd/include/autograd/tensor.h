#pragma once
// Tensor: a cheap handle (one shared_ptr) to a strided view of shared storage.
// Copying a Tensor copies the handle, not the data, as in PyTorch. Views (transpose, narrow, expand,
// view, ...) share storage and differ only in shape, strides and offset.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/backend.h"
#include "autograd/device.h"
#include "autograd/dtype.h"
#include "autograd/shape.h"

namespace stepformer {

struct Node;
struct TensorImpl;

// Device memory, shared by every view of it. `version` counts in-place writes: a tensor saved for
// backward remembers the version it saw, and backward refuses to use it if it changed (as PyTorch).
struct Storage {
  Storage(Backend& backend, std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Backend* backend;
  void* data;
  std::size_t bytes;
  std::uint64_t version = 0;
  std::uint64_t serial;  // storages are numbered in the order they are made (the engine's backward-read check)

  static std::uint64_t next_serial();  // the serial the next storage will get
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (no storage); defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  std::int64_t size(std::int64_t dim) const;  // negative dims count from the end
  std::int64_t dim() const;
  std::int64_t numel() const;
  const Shape& strides() const;
  std::int64_t offset() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;

  // --- autograd ---------------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);  // leaves only; AutogradError otherwise
  bool is_leaf() const;                       // made by a factory, not by a differentiable op
  Tensor grad() const;                        // undefined until a backward reaches this leaf
  void zero_grad();                           // forgets the gradient (PyTorch: set_to_none=True)
  // `hook(leaf)` runs each time a backward has added this leaf's whole gradient for that backward into grad()
  // (torch.Tensor.register_post_accumulate_grad_hook): data parallelism starts sending a gradient from here
  // while backward goes on with the rest. Leaves that require grad only; hooks run in registration order.
  // Returns a handle for remove_post_accumulate_grad_hook (an object whose hook captures it removes it first).
  std::uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook);
  void remove_post_accumulate_grad_hook(std::uint64_t handle);  // unknown handles are ignored
  // Reverse-mode sweep from this tensor. `grad` may be omitted only for a one-element tensor.
  // The graph is freed afterwards unless retain_graph; gradients add into leaves' grad().
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor detach() const;  // same storage, no history, requires_grad false
  // Makes this tensor (and every handle to it) see `src`'s data, shape, dtype and device, keeping its
  // identity, name and requires_grad; forgets its grad. PyTorch's `t.data = src`; for Module::to().
  void set_data(const Tensor& src);

  const std::string& name() const;  // optional label, shown by to_dot
  Tensor& set_name(std::string name);

  // --- element access (copies to the host; for tests, demos and printing) ---------------------------
  double item() const;  // one-element tensors only
  double at(const Shape& index) const;
  void set(const Shape& index, double value);  // an in-place write: bumps the version
  template <class T>
  std::vector<T> to_vector() const;  // row-major values converted to T: float, double or int64_t

  // --- conversions ------------------------------------------------------------------------------
  Tensor to(Device device) const;  // a copy on `device` (this tensor itself when already there)
  // A converted copy (differentiable between float types). A transposed or permuted contiguous tensor keeps its
  // layout (torch's preserve_format): one pass in memory order; any other converts into a contiguous tensor.
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(kCPU); }

  // --- for ops and backends ---------------------------------------------------------------------
  TensorDesc desc() const;  // what a backend kernel sees
  Backend& backend() const;
  std::uint64_t version() const;
  void bump_version() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::float32;
  Device device = kCPU;

  bool requires_grad = false;
  Tensor grad;                             // leaves: accumulated by backward
  std::shared_ptr<Node> grad_fn;           // non-leaves: the op that produced this tensor
  std::shared_ptr<Node> grad_accumulator;  // leaves that require grad: made on first use
  std::vector<std::pair<std::uint64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
  std::string name;
};

// --- factories (float32 on the default device, the CPU unless set, unless told otherwise) ------------
struct Options {
  DType dtype = DType::float32;
  Device device = default_device();
  bool requires_grad = false;
};

Tensor empty(const Shape& shape, Options o = {});
Tensor zeros(const Shape& shape, Options o = {});
Tensor ones(const Shape& shape, Options o = {});
Tensor full(const Shape& shape, double value, Options o = {});
Tensor scalar(double value, Options o = {});  // a 0-dim tensor
Tensor arange(std::int64_t end, Options o = {});
Tensor arange(std::int64_t start, std::int64_t end, std::int64_t step = 1, Options o = {});
// From host values in row-major order; values.size() must equal numel(shape).
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Options o = {});
Tensor from_vector(const std::vector<float>& values, const Shape& shape, Options o = {});
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape, Options o = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);  // contiguous, same dtype and device

// Records every tensor made to require grad (set_requires_grad) on this thread while it is alive, so
// a test can check that every parameter a model creates is registered with it — including one that was
// created inside forward() and is already gone (a layer built in forward: seed 000's bug, docs/seeds.md).
class LeafObserver {
 public:
  struct Record {
    Tensor tensor;  // undefined once the tensor no longer exists
    Shape shape;    // its shape when it was recorded
  };
  LeafObserver();
  ~LeafObserver();
  LeafObserver(const LeafObserver&) = delete;
  LeafObserver& operator=(const LeafObserver&) = delete;
  std::vector<Record> records() const;

 private:
  std::vector<std::pair<std::weak_ptr<TensorImpl>, Shape>> seen_;
  LeafObserver* previous_;
  friend class Tensor;
};

// Memory in use by a device's allocations, in bytes (leak tests and the demo's report).
std::size_t bytes_in_use(Device device = kCPU);
std::size_t host_waits(Device device);          // Backend::host_waits: how often the host has waited for `device`
std::size_t kernel_launches(Device device);     // Backend::kernel_launches: kernels queued on `device` so far
std::size_t driver_allocations(Device device);  // Backend::driver_allocations: cudaMalloc calls on `device` so far

}  // namespace stepformer
