#pragma once
// Every error the engine raises is one of these types, and its message names the op and the offending
// shapes or values, e.g. "matmul: inner dimensions differ: [2, 3] @ [4, 5]".
#include <stdexcept>
#include <string>

namespace stepformer {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
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
struct NotImplemented : Error {  // an exercise stub, or a feature not built on this device
  using Error::Error;
};

}  // namespace stepformer
