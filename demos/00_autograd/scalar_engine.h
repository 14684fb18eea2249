#pragma once
// Reverse-mode autodiff on single numbers, in one screen: the whole idea of autograd/src/engine.cpp before its
// production concerns (tensors, devices, hooks, anomaly mode, version counters, freeing the graph). The names
// and the order are the real engine's: an op calls record(), backward() takes topological_order() and walks
// it in reverse, adding each consumer's share into its inputs' gradients. docs/00_autograd.md, section 0,
// walks from each piece here to its counterpart there. (micrograd, by Andrej Karpathy, is the same size; this
// one is written for this project's names.)
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

namespace scalar_engine {

struct Node;
using Value = std::shared_ptr<Node>;  // a handle, as a Tensor is a handle to its TensorImpl

// Given the gradient of the op's output, the gradient of each input (chain rule: incoming times local slope).
using BackwardFn = std::function<std::vector<double>(double grad_out)>;

// One number of the graph: a leaf (made by leaf()) or the output of an op (made by record()).
struct Node {
  double data = 0;
  double grad = 0;            // d(root)/d(this), filled by backward()
  const char* op = "leaf";    // for printing
  std::vector<Value> inputs;  // what the op read: the real engine's edges
  BackwardFn backward;        // empty for a leaf
};

inline Value leaf(double x) {
  auto n = std::make_shared<Node>();
  n->data = x;
  return n;
}

// Forward: the op has computed `data`; its output remembers the inputs and how to send a gradient back to them.
inline Value record(double data, const char* op, std::vector<Value> inputs, BackwardFn backward) {
  Value out = leaf(data);
  out->op = op;
  out->inputs = std::move(inputs);
  out->backward = std::move(backward);
  return out;
}

// The ops: each is its value plus its local derivatives. Inputs are captured by the closure, as the real
// ops save the tensors their backward needs.
inline Value operator+(const Value& a, const Value& b) {
  return record(a->data + b->data, "+", {a, b}, [](double g) { return std::vector<double>{g, g}; });
}
inline Value operator*(const Value& a, const Value& b) {
  return record(a->data * b->data, "*", {a, b}, [a, b](double g) {
    return std::vector<double>{g * b->data, g * a->data};
  });
}
inline Value pow(const Value& a, double k) {
  return record(std::pow(a->data, k), "pow", {a},
                [a, k](double g) { return std::vector<double>{g * k * std::pow(a->data, k - 1)}; });
}
inline Value tanh(const Value& a) {
  const double y = std::tanh(a->data);
  return record(y, "tanh", {a}, [y](double g) { return std::vector<double>{g * (1 - y * y)}; });
}
inline Value operator-(const Value& a) { return a * leaf(-1); }
inline Value operator-(const Value& a, const Value& b) { return a + -b; }
inline Value operator/(const Value& a, const Value& b) { return a * pow(b, -1); }

// Every node `root` depends on, each after all of its inputs (depth first, a node once however many paths
// reach it). Reversed, every node comes before its inputs: its gradient is complete when it is sent on.
inline std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> order;
  std::set<Node*> visited;
  std::function<void(Node*)> visit = [&](Node* n) {
    if (!visited.insert(n).second) return;
    for (const Value& in : n->inputs) visit(in.get());
    order.push_back(n);
  };
  visit(root);
  return order;
}

// d(root)/d(every node): seed 1 at the root, then each node, consumers first, adds its share into its inputs.
// `+=`, not `=`: a value used twice (x * x) gets the sum of both paths (the multivariate chain rule).
inline void backward(const Value& root) {
  const std::vector<Node*> order = topological_order(root.get());
  for (Node* n : order) n->grad = 0;
  root->grad = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (!n->backward) continue;  // a leaf: its gradient is the answer
    const std::vector<double> shares = n->backward(n->grad);
    for (std::size_t i = 0; i < n->inputs.size(); ++i) n->inputs[i]->grad += shares[i];
  }
}

}  // namespace scalar_engine
