// The backward engine: how reverse mode works here (read docs/00_autograd.md beside this file).
//
// 1. Forward: each differentiable op calls record(), which gives its output a Node holding the op's
//    backward function (it maps the output's gradient and the tensors the op saved to every input's
//    gradient at once), the saved tensors, and one Edge per input, naming the Node that receives that
//    input's gradient: the input's grad_fn, or, for a leaf, its accumulator.
// 2. backward(): a depth-first walk from the root collects the reachable Nodes in topological order
//    (an explicit stack, not recursion: a long chain must not overflow the C++ stack). Walking that
//    order backwards guarantees that a Node runs only after every consumer of its output has added its
//    share of the gradient, so a tensor used twice gets the sum of both contributions.
// 3. Accumulators add into the leaf's grad (PyTorch semantics: repeated backward() calls accumulate), then run
//    the leaf's post-accumulate hooks: its gradient for this backward is complete.
// 4. Unless retain_graph, every visited Node drops its backward function and saved tensors afterwards.
#include "topological_order.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/scope.h"

namespace stepformer {

namespace {
std::atomic<std::int64_t> g_live_nodes{0};
}  // namespace

// --- nodes ----------------------------------------------------------------------------------------------
Node::Node() { ++g_live_nodes; }
// Releasing a long chain the natural way recurses once per node (each node's destructor drops the
// last reference to the next) and overflows the stack. Instead, take the children only this node owns
// and release them in a loop, so the depth of destruction stays 2 however long the graph.
Node::~Node() {
  --g_live_nodes;
  std::vector<std::shared_ptr<Node>> orphans;
  auto adopt = [&orphans](Node& n) {
    for (Edge& e : n.edges)
      if (e.to && e.to.use_count() == 1) orphans.push_back(std::move(e.to));
  };
  adopt(*this);
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    adopt(*n);
  }  // n is destroyed here with no children left to recurse into
}
std::int64_t Node::live_count() { return g_live_nodes.load(); }

namespace {
// The node that receives gradients for `t`: its grad_fn, or its accumulator if it is a leaf.
std::shared_ptr<Node> gradient_sink(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  if (impl.grad_fn) return impl.grad_fn;
  if (!impl.grad_accumulator) {
    auto acc = std::make_shared<Node>();
    acc->accumulates = true;
    acc->leaf = t.impl_ptr();  // weak: the graph does not keep a leaf alive
    acc->shape = impl.shape;
    acc->dtype = impl.dtype;
    impl.grad_accumulator = std::move(acc);
  }
  return impl.grad_accumulator;
}
}  // namespace

namespace {

struct NonFinite {
  bool nan = false, inf = false;
};

NonFinite scan(const Tensor& t) {
  NonFinite r;
  if (!t.defined() || (t.dtype() != DType::float32 && t.dtype() != DType::float64)) return r;
  for (double x : t.to_vector<double>()) r.nan |= x != x, r.inf |= std::isinf(x);
  return r;
}

// Anomaly mode, forward: does `out` hold a NaN (or, except from `where`, an infinity) that no input had?
void check_output(Op op, const Tensor& out, const std::vector<Tensor>& inputs) {
  const NonFinite o = scan(out);
  if (!o.nan && !o.inf) return;
  NonFinite in;
  std::string shapes;
  for (const Tensor& i : inputs) {
    const NonFinite s = scan(i);
    in.nan |= s.nan, in.inf |= s.inf;
    if (i.defined()) shapes += (shapes.empty() ? "" : ", ") + to_string(i.shape());
  }
  const bool new_nan = o.nan && !in.nan, new_inf = o.inf && !in.inf && op != Op::where;
  if (new_nan || new_inf)
    throw AnomalyError(fmt::format("anomaly: '{}' produced {} in its output {} from inputs {} that had none",
                                   op_info(op).name, new_nan ? "NaN" : "infinity", to_string(out.shape()), shapes));
}

}  // namespace

void record(Op op, Tensor& out, const std::vector<Tensor>& inputs, std::vector<Tensor> saved, BackwardFn backward) {
  if (!grad_enabled()) return;
  if (detect_anomaly()) check_output(op, out, inputs);
  std::vector<Edge> edges;
  bool any = false;
  for (const Tensor& in : inputs) {
    const bool wants = in.defined() && in.requires_grad();
    edges.push_back({wants ? gradient_sink(in) : nullptr, in.defined() ? in.shape() : Shape{}});
    any |= wants;
  }
  if (!any) return;  // `backward` and the tensors it captured are dropped here
  auto node = std::make_shared<Node>();
  node->op = op;
  node->shape = out.shape();
  node->dtype = out.dtype();
  node->backward = std::move(backward);
  node->edges = std::move(edges);
  for (Tensor& s : saved) {
    node->saved_versions.push_back(s.defined() ? s.version() : 0);
    if (s.defined()) s = s.detach();
  }
  node->saved = std::move(saved);
  if (detect_anomaly()) node->scope = current_scope();
  out.impl()->grad_fn = std::move(node);
  out.impl()->requires_grad = true;
}

// --- backward ----------------------------------------------------------------------------------------------
std::vector<Node*> topological_order(Node* root) {
  // EXERCISE 0.4: every node reachable from root, root first, each before the nodes it sends gradients to.
  std::vector<Node*> order;  // post-order: every node after all nodes it sends gradients to
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, std::size_t>> stack{{root, 0}};  // node, next edge to visit
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->edges.size()) {
      Node* child = node->edges[next++].to.get();  // null: that input needs no gradient
      if (child && seen.insert(child).second) stack.emplace_back(child, 0);
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};  // root first
  // END EXERCISE
}

namespace {

// The order is checked, not trusted: a node listed twice runs twice (its gradient arrives in parts: right
// values, repeated work), one listed before a node that sends it a gradient runs with a partial gradient. Both
// are mistakes topological_order can make (it is exercise 0.4); the check is linear in the graph's size.
std::string node_name(const Node* n) { return n->is_accumulator() ? "a leaf's accumulator" : op_info(n->op).name; }

void check_order(const std::vector<Node*>& order) {
  std::unordered_map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (!position.emplace(order[i], i).second)
      throw Error(fmt::format("backward: the topological order lists '{}' twice", node_name(order[i])));
  for (std::size_t i = 0; i < order.size(); ++i)
    for (const Edge& e : order[i]->edges) {
      if (!e.to) continue;
      const auto it = position.find(e.to.get());
      if (it == position.end())
        throw Error(fmt::format("backward: the topological order leaves out '{}', which '{}' sends a gradient to",
                                node_name(e.to.get()), node_name(order[i])));
      if (it->second < i)
        throw Error(
            fmt::format("backward: the topological order puts '{}' before '{}', which sends it a "
                        "gradient",
                        node_name(e.to.get()), node_name(order[i])));
    }
}

void check_saved(const Node& node) {
  for (std::size_t i = 0; i < node.saved.size(); ++i) {
    const Tensor& s = node.saved[i];
    if (s.defined() && s.version() != node.saved_versions[i])
      throw InplaceError(
          fmt::format("backward of '{}': a tensor it saved was modified in place (version {} at forward, now {}); "
                      "modify a clone instead, or do the in-place change before the op",
                      op_info(node.op).name, node.saved_versions[i], s.version()));
  }
}

// What the running backward function may read (detail::check_backward_read).
struct BackwardReads {
  const Node* node;
  const Storage* grad;
  std::uint64_t first_new_storage;  // storages made during this backward have this serial or later
};
thread_local const BackwardReads* g_backward_reads = nullptr;

Gradients run_backward(const Node& node, const Tensor& g) {
  const BackwardReads reads{&node, g.impl()->storage.get(), Storage::next_serial()};
  const BackwardReads* outer = std::exchange(g_backward_reads, &reads);
  struct Restore {
    const BackwardReads* outer;
    ~Restore() { g_backward_reads = outer; }
  } restore{outer};
  return node.backward(g, node.saved);
}

// Whether nothing but `g` holds g's memory, all of it, laid out as the leaf's gradient: then g can become that
// gradient (as PyTorch's AccumulateGrad steals a gradient nobody else references). A gradient handed to two
// inputs (add's), a view of another gradient, or one the caller passed to backward() is held elsewhere too.
bool sole_owner(const Tensor& g, const TensorImpl& leaf) {
  const auto& impl = g.impl_ptr();
  return impl.use_count() == 1 && impl->storage.use_count() == 1 && g.offset() == 0 && g.is_contiguous() &&
         impl->storage->bytes == static_cast<std::size_t>(g.numel()) * element_size(g.dtype()) &&
         g.dtype() == leaf.dtype && g.shape() == leaf.shape && leaf.storage &&
         g.device() == leaf.storage->backend->device();
}

void accumulate_into_leaf(const Node& acc, const Tensor& g) {
  auto leaf_impl = acc.leaf.lock();
  if (!leaf_impl) return;  // the leaf is gone: nobody can read its gradient
  Tensor& grad = leaf_impl->grad;
  if (!grad.defined()) {
    if (sole_owner(g, *leaf_impl)) {
      grad = g;  // no copy: one pass and one kernel launch per parameter and step fewer
    } else {
      grad = empty_like(g);  // a fresh buffer: g is held elsewhere too
      copy_(grad, g);
    }
  } else {
    add_(grad, g);
  }
  // The order guarantees that every sender has run: this is the leaf's whole gradient for this backward.
  // A copy: a hook may remove hooks.
  const Tensor leaf(leaf_impl);
  const auto hooks = leaf_impl->post_accumulate_hooks;
  for (const auto& [handle, hook] : hooks) hook(leaf);
}

}  // namespace

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  if (!requires_grad())
    throw AutogradError(
        "backward: the tensor does not require grad (no input of its graph requires grad, "
        "or it was computed under NoGradGuard)");
  Tensor seed = grad;
  if (!seed.defined()) {
    if (numel() != 1)
      throw AutogradError(
          fmt::format("backward: a gradient can be created implicitly only for a one-element "
                      "tensor, got shape {}; pass grad explicitly",
                      to_string(shape())));
    seed = ones_like(*this);
  } else if (seed.shape() != shape()) {
    throw ShapeError(
        fmt::format("backward: grad has shape {}, tensor has shape {}", to_string(seed.shape()), to_string(shape())));
  }

  NoGradGuard no_grad;  // gradients are computed without recording a graph of their own
  std::shared_ptr<Node> root = gradient_sink(*this);
  const std::vector<Node*> order = topological_order(root.get());
  check_order(order);
  std::unordered_map<Node*, Tensor> pending{{root.get(), seed}};

  for (Node* node : order) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // no gradient flowed here (e.g. a branch after a stop)
    const Tensor g = std::move(it->second);
    pending.erase(it);
    if (node->is_accumulator()) {
      accumulate_into_leaf(*node, g);
      continue;
    }
    if (node->released)
      throw AutogradError(
          fmt::format("backward through '{}' a second time: its saved tensors were freed by "
                      "the first backward; pass retain_graph=true to the first call",
                      op_info(node->op).name));
    check_saved(*node);
    const Gradients grads = run_backward(*node, g);
    if (grads.size() != node->edges.size())  // an engine bug, never a user error
      throw Error(fmt::format("internal: backward of '{}' returned {} gradients for {} inputs", op_info(node->op).name,
                              grads.size(), node->edges.size()));
    const NonFinite g_bad = detect_anomaly() ? scan(g) : NonFinite{};
    for (std::size_t k = 0; k < node->edges.size(); ++k) {
      const Edge& e = node->edges[k];
      if (!e.to) continue;  // this input needs no gradient
      const Tensor& gi = grads[k];
      if (!gi.defined() || gi.shape() != e.input_shape)  // a bug in the op's backward function
        throw Error(fmt::format(
            "backward of '{}' produced {} for input {} of shape {} (a gradient has its input's shape: sum_to sums "
            "broadcast dims away)",
            op_info(node->op).name, gi.defined() ? "a gradient of shape " + to_string(gi.shape()) : "no gradient", k,
            to_string(e.input_shape)));
      if (detect_anomaly()) {
        const NonFinite bad = scan(gi);
        if ((bad.nan && !g_bad.nan) || (bad.inf && !g_bad.inf))
          throw AnomalyError(fmt::format(
              "anomaly: the backward of '{}'{} produced {} in the gradient of its input {} (shape {}) from a "
              "gradient {} without any",
              op_info(node->op).name, node->scope && !node->scope->empty() ? " (forward in " + *node->scope + ")" : "",
              bad.nan && !g_bad.nan ? "NaN" : "infinity", k, to_string(e.input_shape), to_string(g.shape())));
      }
      auto [slot, fresh] = pending.try_emplace(e.to.get(), gi);
      if (!fresh) {  // e.to already holds a gradient from another consumer of the same tensor
        // EXERCISE 0.5: a tensor read by several ops: its gradient is the sum of theirs.
        slot->second = add(slot->second, gi);
        // END EXERCISE
      }
    }
  }

  if (!retain_graph) {
    for (Node* node : order) {
      if (node->is_accumulator()) continue;
      node->backward = nullptr;
      node->saved.clear();  // frees the saved tensors
      node->released = true;
    }
  }
}

namespace detail {
bool is_cast_of(const Tensor& copy, const Tensor& source) {
  const Node* node = copy.impl()->grad_fn.get();
  if (!node || node->op != Op::to_dtype || node->edges.size() != 1 || !node->edges[0].to) return false;
  const TensorImpl& s = *source.impl();
  return node->edges[0].to == (s.grad_fn ? s.grad_fn : s.grad_accumulator);
}

bool views_parameter(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  if (!impl.requires_grad) return false;
  if (!impl.grad_fn) return true;  // a leaf
  const Node* node = impl.grad_fn.get();
  // A view's node has one input; a few steps reach the parameter's accumulator, or the chain is not views alone.
  for (int depth = 0; node && !node->is_accumulator() && depth < 4; ++depth)
    node = node->edges.size() == 1 ? node->edges[0].to.get() : nullptr;
  if (!node || !node->is_accumulator()) return false;
  const auto leaf = node->leaf.lock();
  return leaf && leaf->storage == impl.storage;
}

void check_backward_read(const Tensor& t) {
  const BackwardReads* reads = g_backward_reads;
  if (!reads) return;
  const Storage* storage = t.impl()->storage.get();
  if (storage == reads->grad || storage->serial >= reads->first_new_storage) return;
  for (const Tensor& s : reads->node->saved)
    if (s.defined() && s.impl()->storage.get() == storage) return;
  throw AutogradError(fmt::format(
      "backward of '{}' reads a tensor of shape {} that it did not save: its in-place changes would go unseen; "
      "pass it to record() among the saved tensors",
      op_info(reads->node->op).name, to_string(t.shape())));
}
}  // namespace detail

}  // namespace stepformer
