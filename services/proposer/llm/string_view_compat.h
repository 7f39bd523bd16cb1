// Debian's abseil is built with its own absl::string_view (not std::string_view); this turns
// the std::string_view of kforge's interfaces into the type absl's string functions take.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace kforge {

inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace kforge
