#pragma once
// Chapter 12 — a decoding position kept on the device, for a step recorded once as a device graph and replayed at
// each next position (docs/09_cuda.md, "Graphs: many kernels, one launch"). Read docs/12_modern_lm.md.
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace stepformer::transformer {

// The position of a step's one token as an int64 [1] tensor on the device, and what a step reads at it: table rows
// (RoPE's, the sinusoidal or learned positions') and the mask of the cache rows past it. Each is computed
// once a step, by the step's kernels, and shared by its layers; advance() moves the position on the device and
// drops them. Positions stay below `limit` (the cache's capacity): a gather past it is an index error.
class DevicePosition {
 public:
  DevicePosition(std::int64_t start, std::int64_t limit, Device device);
  const Tensor& tensor() const { return position_; }
  std::int64_t limit() const { return limit_; }
  // Row `position` of a table [limit or more, E] (the first `limit` rows are read), in `dtype`: [1, E].
  Tensor row_of(const Tensor& table, DType dtype);
  Tensor past();  // bool [limit]: true past it (the cache rows the step's token may not see)
  void advance();

 private:
  struct Row {
    Tensor table, row;  // the table is held so that its address, the key, is not another's within the step
    DType dtype;
  };
  Tensor position_, one_, slots_;  // int64 [1], [1] and [limit]: 0 .. limit - 1
  std::int64_t limit_;
  std::vector<Row> rows_;
  Tensor past_;
};

}  // namespace stepformer::transformer
