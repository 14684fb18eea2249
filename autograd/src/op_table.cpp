#include "autograd/op_table.h"

namespace stepformer {

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = {
#define STEPFORMER_OP_INFO(name, family, backward) {#name, family, backward},
      STEPFORMER_OPS(STEPFORMER_OP_INFO)
#undef STEPFORMER_OP_INFO
  };
  return table;
}
const OpInfo& op_info(Op op) { return all_ops()[static_cast<std::size_t>(op)]; }

}  // namespace stepformer
