// The autograd graph as Graphviz DOT.
#include "../helpers.h"

using namespace stepformer;

TEST_CASE("to_dot draws ops, shapes and leaves", "[ch00][graphviz]") {
  Tensor w = ones({2, 3}).set_requires_grad().set_name("w");
  Tensor x = ones({3});
  Tensor y = sum(relu(matmul(w, x)));
  const std::string dot = to_dot(y);
  CHECK_THAT(dot, Catch::Matchers::StartsWith("digraph"));
  for (const char* s : {"matmul", "relu", "sum", "w\\n[2, 3]", "requires_grad", "->"})
    CHECK_THAT(dot, Catch::Matchers::ContainsSubstring(s));
}

TEST_CASE("to_dot of a tensor without history is one node", "[ch00][graphviz]") {
  const std::string dot = to_dot(ones({2}));
  CHECK_THAT(dot, Catch::Matchers::ContainsSubstring("no graph"));
}

TEST_CASE("to_dot shows each node's dtype, autocast's bfloat16 casts filled", "[ch00][ch11][graphviz]") {
  Tensor w = ones({2, 3}).set_requires_grad().set_name("w");
  Tensor y;
  {
    const AutocastGuard autocast(DType::bfloat16);
    y = sum(matmul(w, ones({3, 1})));
  }
  const std::string dot = to_dot(y);
  CHECK_THAT(dot, Catch::Matchers::ContainsSubstring("w\\n[2, 3] float32"));  // the master weight
  CHECK_THAT(dot, Catch::Matchers::ContainsSubstring("to_dtype\\n[2, 3] bfloat16\", shape=box, style=filled"));
  CHECK_THAT(dot, Catch::Matchers::ContainsSubstring("matmul\\n[2, 1] float32\", shape=box]"));  // a float32 product
}
