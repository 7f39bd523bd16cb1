// Short semantics of the aten ops kforge meets most, for LLM prompts; other ops get a
// generic description built from their schema.
#pragma once

#include <string>
#include <string_view>

#include "kforge/v1/common.pb.h"

namespace kforge {

// What `op` ("aten::softmax") computes, in a sentence or two; empty when not known.
std::string_view KnownAtenOpDescription(std::string_view op);

// The known description, else one derived from the node's schema (arguments and results).
std::string DescribeAtenOp(const v1::SubgraphNode& node);

}  // namespace kforge
