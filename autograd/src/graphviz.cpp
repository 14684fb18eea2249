#include "autograd/graphviz.h"

#include <fmt/format.h>

#include <unordered_map>

#include "autograd/engine.h"

namespace stepformer {

std::string to_dot(const Tensor& root) {
  std::string dot = "digraph autograd {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  const std::shared_ptr<Node> start = root.grad_fn() ? root.grad_fn() : root.impl()->grad_accumulator;
  if (!start) return dot + fmt::format("  n0 [label=\"{}\\n(no graph)\", shape=box];\n}}\n", to_string(root.shape()));

  std::unordered_map<const Node*, int> ids;
  std::vector<const Node*> todo{start.get()};
  ids[start.get()] = 0;
  std::string edges;
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    const int id = ids[n];
    if (n->is_accumulator()) {
      auto leaf = n->leaf.lock();
      const std::string name = leaf && !leaf->name.empty() ? leaf->name : "leaf";
      std::string values;  // a one-element leaf shows its value and gradient, as micrograd's draw_dot
      if (leaf && numel(leaf->shape) == 1) {
        values = fmt::format("\\ndata {:.4g}", Tensor(leaf).item());
        if (leaf->grad.defined()) values += fmt::format(" | grad {:.4g}", leaf->grad.item());
      }
      dot += fmt::format(
          "  n{} [label=\"{}\\n{} {}{}\\nrequires_grad\", shape=ellipse, style=filled, fillcolor=\"#dbeafe\"];\n", id,
          name, to_string(n->shape), dtype_name(n->dtype), values);
      continue;
    }
    // bfloat16 results filled amber, so that autocast's casts and products stand out (chapter 11)
    dot +=
        fmt::format("  n{} [label=\"{}\\n{} {}\", shape=box{}];\n", id, op_info(n->op).name, to_string(n->shape),
                    dtype_name(n->dtype), n->dtype == DType::bfloat16 ? ", style=filled, fillcolor=\"#fde68a\"" : "");
    for (const Edge& e : n->edges) {
      if (!e.to) continue;  // an input that needs no gradient is not part of the graph
      auto [it, fresh] = ids.try_emplace(e.to.get(), static_cast<int>(ids.size()));
      if (fresh) todo.push_back(e.to.get());
      edges += fmt::format("  n{} -> n{};\n", it->second, id);  // forward direction: input -> op
    }
  }
  const std::string root_label = root.name().empty() ? "output" : root.name();
  dot += fmt::format("  out [label=\"{}\\n{}\", shape=ellipse, style=filled, fillcolor=\"#dcfce7\"];\n", root_label,
                     to_string(root.shape()));
  if (root.grad_fn()) edges += "  n0 -> out;\n";
  return dot + edges + "}\n";
}

}  // namespace stepformer
