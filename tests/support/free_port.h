// FreeLoopbackPort: a TCP port on 127.0.0.1 that nothing listens on right now.
#pragma once

namespace kforge {

// Binds port 0 on loopback and returns the port the kernel picked (then closes it). Another
// process could take it before the caller does; fine for tests. -1 if no socket can be made.
int FreeLoopbackPort();

}  // namespace kforge
