#include "tenon/span/span.h"

namespace tenon {

constinit span g_empty_span{};
constinit span g_no_span{};

}  // namespace tenon
