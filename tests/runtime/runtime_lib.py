"""Where the runtime tests find libkforge_runtime.so (shared by the CPU and GPU tests)."""
import os


def find_library(path):
    """The runtime library: `path`, else the first libkforge_runtime.so on LD_LIBRARY_PATH."""
    if os.path.isfile(path):
        return path
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        candidate = os.path.join(d, "libkforge_runtime.so")
        if d and os.path.isfile(candidate):
            return candidate
    raise SystemExit(f"libkforge_runtime.so not found at {path} or on LD_LIBRARY_PATH")
