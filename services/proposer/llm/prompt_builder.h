// Prompt builder: one chat turn asking for a kernel for a target. The system prompt holds
// what never changes within a run (role, rules, the kernel ABI header, the launch-plan
// format, the exact answer format) so servers can cache it; the user prompt holds the target
// (schema, semantics, signature, scalars), the GPU, the parent with its feedback, the best
// candidate so far and the failed siblings with their reasons.
#pragma once

#include <cstddef>
#include <string>

#include "kforge/v1/proposer.pb.h"
#include "services/proposer/llm/chat_protocol.h"

namespace kforge {

struct PromptOptions {
  // Compile logs and diagnostics are cut to this many characters (the head holds the first
  // errors).
  size_t max_log_chars = 3000;
  int max_siblings = 8;
  // Failed siblings' sources are quoted up to this many characters (0: reasons only).
  size_t max_sibling_source_chars = 1500;
};

// The fixed part: role, rules, ABI header, launch-plan format, answer format with an example.
std::string BuildSystemPrompt();

// The target-specific part.
std::string BuildUserPrompt(const v1::ProposeRequest& request, const PromptOptions& options = {});

// Both, with request.seed.
ChatRequest BuildProposalPrompt(const v1::ProposeRequest& request,
                                const PromptOptions& options = {});

// The example answer the system prompt shows (the parser accepts it; a test pins that).
std::string ExampleAnswer();

}  // namespace kforge
