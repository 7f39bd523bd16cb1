// Inputs of the LLM tests: recorded API bodies, and ProposeRequests for a float32 softmax
// over rows of 4096 on an H200-like GPU, with or without a parent, best candidate and failed
// siblings.
#pragma once

#include <string>

#include "kforge/v1/proposer.pb.h"

namespace kforge::testing {

// Body of tests/llm/recorded/NAME (recorded OpenAI and Anthropic API bodies).
std::string ReadRecorded(const std::string& name);

v1::ProposeRequest SoftmaxRootRequest();
// A parent that passed (with timing and resources), a best candidate, a sibling that failed
// to compile and one that mismatched.
v1::ProposeRequest SoftmaxChildRequest();

}  // namespace kforge::testing
