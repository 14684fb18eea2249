#include "autograd/errors.h"

#include <cstdlib>
#include <string>

namespace stepformer {

bool exercise_restored(const std::string& number) {
  const char* env = std::getenv("STEPFORMER_RESTORED_EXERCISES");  // read each time: the tests are short
  if (env == nullptr) return false;
  const std::string list = std::string(",") + env + ",";
  return list == ",all," || list.find("," + number + ",") != std::string::npos;
}

}  // namespace stepformer
