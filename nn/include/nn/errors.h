#pragma once
#include "autograd/errors.h"

namespace stepformer::nn {

// A checkpoint or state dict that cannot be loaded: malformed file, missing or unexpected keys,
// shape or dtype mismatches. The message lists every problem found, not just the first.
struct CheckpointError : Error {
  using Error::Error;
};

// A file that cannot be written or read (the message names the path and the system's reason).
struct IoError : Error {
  using Error::Error;
};

}  // namespace stepformer::nn
