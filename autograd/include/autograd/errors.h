#pragma once
// Every error the engine raises is one of these types, and its message names the op and the offending
// shapes or values, e.g. "matmul: inner dimensions differ: [2, 3] @ [4, 5]". Raised inside a module's
// forward, the message starts with the module's path (autograd/scope.h): "decoder.layers.1.ffn.w_1: ...".
#include <stdexcept>
#include <string>

#include "autograd/scope.h"

namespace stepformer {

struct Error : std::runtime_error {
  explicit Error(const std::string& message) : std::runtime_error(with_scope(message)) {}
};
struct ShapeError : Error {  // shapes that do not fit the op (incl. broadcasting, view)
  using Error::Error;
};
struct DimError : Error {  // a dimension index outside [-ndim, ndim)
  using Error::Error;
};
struct DTypeError : Error {  // operands of different or unsupported element types
  using Error::Error;
};
struct DeviceError : Error {  // operands on different devices, or a device that is not built
  using Error::Error;
};
struct IndexError : Error {  // an id or index out of range (embedding ids, class targets, element access)
  using Error::Error;
};
struct ValueError : Error {  // an argument outside its domain (dropout p, eps, ...)
  using Error::Error;
};
struct AutogradError : Error {  // misuse of the tape: backward on non-scalar, freed graph, ...
  using Error::Error;
};
struct InplaceError : AutogradError {  // a tensor saved for backward was modified in place
  using AutogradError::AutogradError;
};
struct ResourceError : Error {  // an allocation failed or a size overflowed
  using Error::Error;
};
struct AnomalyError : Error {  // anomaly mode found NaN or infinity (autograd/anomaly.h)
  using Error::Error;
};
struct NotImplemented : Error {  // an exercise stub, or a feature not built on this device
  using Error::Error;
};

}  // namespace stepformer
