// Kept for includes of the old name: the absl <-> gRPC status conversion lives in status.h.
#pragma once

#include "common/status.h"
