// Tensor files in torch.save's format through LibTorch's pickler (see tensor_io.h).
#include "common/tensor_io.h"

#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// Declared in torch/csrc/jit/serialization/export.h, whose includes (ONNX, mobile bytecode)
// cost far more compile time than this one function is worth.
namespace torch::jit {
TORCH_API void writeArchiveAndTensors(const std::string& archive_name, const char* pickle_bytes,
                                      size_t size, const std::vector<at::Tensor>& tensors,
                                      caffe2::serialize::PyTorchStreamWriter& out);
}  // namespace torch::jit

namespace kforge {
namespace {

std::string Join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : absl::StrCat(prefix, ".", name);
}

// Appends every tensor of `value` under `prefix`; anything else is an error naming its place.
absl::Status Flatten(const c10::IValue& value, const std::string& prefix, const std::string& source,
                     std::vector<NamedTensor>& out) {
  if (value.isTensor()) {
    out.push_back({prefix, value.toTensor()});
    return absl::OkStatus();
  }
  if (value.isTuple() || value.isList() || value.isTensorList()) {
    std::vector<c10::IValue> elements;
    if (value.isTuple()) {
      const auto& e = value.toTupleRef().elements();
      elements.assign(e.begin(), e.end());
    } else {
      elements = value.toListRef().vec();
    }
    for (size_t i = 0; i < elements.size(); ++i) {
      if (auto s = Flatten(elements[i], Join(prefix, std::to_string(i)), source, out); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      std::string key;
      if (entry.key().isString()) {
        key = entry.key().toStringRef();
      } else if (entry.key().isInt()) {
        key = std::to_string(entry.key().toInt());
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": dict keys must be strings or ints, found ",
                         entry.key().tagKind(), "; save a dict of str -> tensor"));
      }
      if (auto s = Flatten(entry.value(), Join(prefix, key), source, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": element '", prefix.empty() ? "<root>" : prefix, "' is a ", value.tagKind(),
      ", not a tensor; save a tensor or a tuple/list/dict of tensors with torch.save"));
}

bool IsSequenceNames(const std::vector<NamedTensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name != std::to_string(i)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<NamedTensor>> ParseTensors(std::string_view bytes,
                                                      std::string_view source_view) {
  const std::string source(source_view);  // absl::StrCat here predates std::string_view
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is empty; expected a file written by torch.save"));
  }
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a torch.save file of tensors (", e.what_without_backtrace(),
                     "); write it with torch.save(tuple_of_tensors, path)"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a torch.save file of tensors (", e.what(),
                     "); write it with torch.save(tuple_of_tensors, path)"));
  }
  std::vector<NamedTensor> tensors;
  if (auto s = Flatten(value, "", source, tensors); !s.ok()) return s;
  return tensors;
}

absl::StatusOr<std::vector<NamedTensor>> ReadTensors(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("cannot open tensor file ", path, ": ", std::strerror(errno)));
  }
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) {
    return absl::DataLossError(absl::StrCat("cannot read tensor file ", path));
  }
  return ParseTensors(bytes, path);
}

absl::StatusOr<std::string> SerializeTensors(const std::vector<NamedTensor>& tensors,
                                             TensorContainer container) {
  if (container == TensorContainer::kAuto) {
    if (tensors.size() == 1 && tensors[0].name.empty()) {
      container = TensorContainer::kTuple;  // a bare tensor, written below
    } else {
      container = IsSequenceNames(tensors) ? TensorContainer::kTuple : TensorContainer::kDict;
    }
  }
  c10::IValue value;
  try {
    if (tensors.size() == 1 && tensors[0].name.empty()) {
      value = tensors[0].tensor;
    } else if (container == TensorContainer::kDict) {
      c10::Dict<std::string, at::Tensor> dict;
      for (const auto& t : tensors) {
        if (dict.contains(t.name)) {
          return absl::InvalidArgumentError(
              absl::StrCat("two tensors are named '", t.name, "'; dict keys must be unique"));
        }
        dict.insert(t.name, t.tensor);
      }
      value = dict;
    } else if (container == TensorContainer::kList) {
      // A list of Any, not List[Tensor]: the latter pickles through
      // torch.jit._pickle.build_tensorlist, which torch.load(weights_only=True) refuses.
      c10::impl::GenericList list(c10::AnyType::get());
      for (const auto& t : tensors) list.push_back(t.tensor);
      value = list;
    } else {
      std::vector<c10::IValue> elements;
      for (const auto& t : tensors) elements.emplace_back(t.tensor);
      value = c10::ivalue::Tuple::create(std::move(elements));
    }
    // torch::jit::pickle_save, minus the type tags it puts on dicts and lists: those make
    // Python's torch.load (weights_only=True by default) refuse the file.
    std::vector<char> pickle_data;
    torch::jit::Pickler pickler(
        [&](const char* data, size_t size) {
          pickle_data.insert(pickle_data.end(), data, data + size);
        },
        nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    std::string out;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
      out.append(static_cast<const char*>(data), size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot serialize tensors: ", e.what_without_backtrace()));
  }
}

absl::Status WriteTensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                          TensorContainer container) {
  auto bytes = SerializeTensors(tensors, container);
  if (!bytes.ok()) return bytes.status();
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  file.close();
  if (!file) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write tensor file ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kforge
