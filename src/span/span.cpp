#include "tenon/span/span.h"

namespace tenon {

constinit span g_empty_span{};

}  // namespace tenon
