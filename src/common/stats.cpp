// The text printed beside each statistics counter.
#include "tenon/common/stats.h"

namespace tenon {

const char* const kStatNames[stat_count] = {
#define TENON_STAT_TEXT(name, text) text,
    TENON_STAT_LIST(TENON_STAT_TEXT)
#undef TENON_STAT_TEXT
};

}  // namespace tenon
