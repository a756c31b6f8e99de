#include "kiln/core/inline_vector.h"

#include "kiln/core/error.h"

namespace kiln {

void throw_inline_vector_full(size_t capacity) {
  throw Error("a list held inline (a tensor's dimensions, a step's loss parts) takes at most {} values", capacity);
}

}  // namespace kiln
