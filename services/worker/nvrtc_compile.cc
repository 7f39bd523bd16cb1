// NVRTC driver of the kforge-nvrtc child (see nvrtc_compile.h).
#include "services/worker/nvrtc_compile.h"

#include <nvrtc.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/worker/compile_policy.h"
#include "services/worker/ptxas_report.h"

namespace kforge {

std::string NvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc unknown";
  return absl::StrCat("nvrtc ", major, ".", minor);
}

std::string NvrtcSupportedArchs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return "";
  std::vector<int> archs(count);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return "";
  std::string out;
  for (int arch : archs) absl::StrAppend(&out, out.empty() ? "" : " ", "sm_", arch);
  return out;
}

v1::CompileResult CompileWithNvrtc(std::string_view source, const v1::CompileOptions& options,
                                   const std::string& cuda_include_dir) {
  v1::CompileResult result;
  result.set_arch(options.arch());
  result.set_compiler_version(NvrtcVersionString());

  const std::string source_text(source);
  const std::string header(KforgeDeviceHeader());
  const char* header_contents[] = {header.c_str()};
  const char* header_names[] = {"kforge_device.h"};
  nvrtcProgram program = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&program, source_text.c_str(), "kernel.cu", 1,
                                      header_contents, header_names);
  if (rc != NVRTC_SUCCESS) {
    result.set_status(rc == NVRTC_ERROR_OUT_OF_MEMORY ? v1::COMPILE_RESOURCE_LIMIT
                                                      : v1::COMPILE_FAILED);
    result.set_log(absl::StrCat("nvrtcCreateProgram failed: ", nvrtcGetErrorString(rc)));
    return result;
  }

  const std::vector<std::string> flags = NvrtcFlags(options, cuda_include_dir);
  std::vector<const char*> flag_ptrs;
  for (const std::string& flag : flags) flag_ptrs.push_back(flag.c_str());
  rc = nvrtcCompileProgram(program, static_cast<int>(flag_ptrs.size()), flag_ptrs.data());

  size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(program, log.data()) == NVRTC_SUCCESS) {
      log.resize(std::strlen(log.c_str()));  // NVRTC pads the log with NULs
    } else {
      log.clear();
    }
  }

  if (rc == NVRTC_SUCCESS) {
    size_t cubin_size = 0, ptx_size = 0;
    std::string cubin, ptx;
    if (nvrtcGetCUBINSize(program, &cubin_size) == NVRTC_SUCCESS && cubin_size > 0) {
      cubin.resize(cubin_size);
      if (nvrtcGetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) cubin.clear();
    }
    if (nvrtcGetPTXSize(program, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
      ptx.resize(ptx_size);
      if (nvrtcGetPTX(program, ptx.data()) == NVRTC_SUCCESS) {
        ptx.resize(std::strlen(ptx.c_str()));
      } else {
        ptx.clear();
      }
    }
    if (cubin.empty()) {
      result.set_status(v1::COMPILE_FAILED);
      absl::StrAppend(&log, log.empty() ? "" : "\n", "NVRTC produced no cubin (is ", options.arch(),
                      " a real architecture?)");
    } else {
      result.set_status(v1::COMPILE_OK);
      result.set_cubin(std::move(cubin));
      result.set_ptx(std::move(ptx));
      for (v1::KernelResources& kernel : ParsePtxasReport(log)) {
        *result.add_kernels() = std::move(kernel);
      }
    }
  } else if (rc == NVRTC_ERROR_OUT_OF_MEMORY || rc == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE ||
             rc == NVRTC_ERROR_INTERNAL_ERROR) {
    // Not the source's fault: memory ran out (loading the builtins library is the first
    // thing to fail under a tight limit) or NVRTC broke. Not cached; retried next time.
    result.set_status(v1::COMPILE_RESOURCE_LIMIT);
    absl::StrAppend(&log, log.empty() ? "" : "\n", "nvrtc: ", nvrtcGetErrorString(rc));
  } else if (log.find("out of memory") != std::string::npos) {
    result.set_status(v1::COMPILE_RESOURCE_LIMIT);  // the frontend reports it as an error
  } else {
    result.set_status(v1::COMPILE_FAILED);
    if (rc != NVRTC_ERROR_COMPILATION) {  // e.g. an option NVRTC rejects
      absl::StrAppend(&log, log.empty() ? "" : "\n", "nvrtc: ", nvrtcGetErrorString(rc));
    }
  }
  result.set_log(std::move(log));
  nvrtcDestroyProgram(&program);
  return result;
}

}  // namespace kforge
