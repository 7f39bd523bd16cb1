// Tensor files: reads what Python's torch.save writes for a tensor or a tuple/list/dict of
// tensors, and writes the same format so Python's torch.load reads it. The one tensor
// serializer of kforge (captured inputs, validation inputs, eager references).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kforge {

// A tensor and its place in the saved container: "0", "1", ... for a tuple or list, the key
// for a dict, "" for a bare tensor; nested containers join with '.' ("1.0", "x.0").
struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

// How WriteTensors lays the tensors out; kAuto picks a tuple when the names are "0".."n-1"
// in order (or a bare tensor for a single unnamed one) and a dict otherwise.
enum class TensorContainer { kAuto, kTuple, kList, kDict };

// Parses torch.save bytes. `source` names where the bytes came from (a path, "inputs blob
// <digest>") and appears in every error message.
absl::StatusOr<std::vector<NamedTensor>> ParseTensors(std::string_view bytes,
                                                      std::string_view source);
// Reads a torch.save file; a missing or corrupt file is an error that names the file.
absl::StatusOr<std::vector<NamedTensor>> ReadTensors(const std::string& path);

// Serializes to torch.save's zip format (torch::pickle_save). Tensors are written as they
// are (device included, strides preserved); torch.load(..., map_location="cpu") reads them.
absl::StatusOr<std::string> SerializeTensors(const std::vector<NamedTensor>& tensors,
                                             TensorContainer container = TensorContainer::kAuto);
absl::Status WriteTensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                          TensorContainer container = TensorContainer::kAuto);

}  // namespace kforge
