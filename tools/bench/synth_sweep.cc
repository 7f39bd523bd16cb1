// kforge-synth-sweep: the synthesizer's ceiling on the anchor shapes of ../shared/GPU.md. For
// every anchor row it enumerates the whole space of valid canonical configs of the family that
// covers the op (ParamSpace product, Canonicalize, Check), compiles them (NVRTC through the
// worker's Compiler, 8 configs per program: kernel_batch.h, in parallel threads), times every
// one in a quick pass (kforge-synth-sweep-quick: one input set checked against the float64
// reference, a few L2-flushed launches; chunk by chunk while the row still compiles), puts the
// best few through the worker's full validation and timing (default policy, interleaved eager
// baseline, median + CI) and prints one markdown table beside eager, torch.compile
// (tools/bench/torch_compile_times.py's JSON) and the floor.
//
// Without limits it sweeps every valid config — ~186k over the 11 rows, ~0.1-0.3 CPU-s of
// NVRTC each. --max-configs and --time-budget-s bound it (the prior's best configs interleaved
// with seeded random ones). An exhaustive sweep is split instead: --shard I/N per GPU (a hashed
// 1/N of every row), --quick-only, results appended to --details after every chunk, --resume
// in a later call to carry what is done, and --finish to validate the best of all shards and
// print the table; its "configs swept" of "valid" is the coverage. tools/gpu-steps/
// synth_sweep.sh runs both ways. A benchmark, not a test.
//
//   kforge-synth-sweep [--rows ID,...] [--max-configs N] [--time-budget-s S] [--top K]
//                      [--shard I/N] [--resume] [--quick-only] [--finish] [--batch B]
//                      [--compile-only] [--torch-times JSON] [--out FILE] [--details DIR]
//                      [--emit-rows JSON]   (--help lists the rest)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/file_io.h"
#include "common/op_cost.h"
#include "common/status.h"
#include "common/store.h"
#include "common/torch_rows.h"
#include "nlohmann/json.hpp"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/family_registry.h"
#include "services/proposer/synth/seeded_rng.h"
#include "services/worker/compile_policy.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "services/worker/subprocess.h"
#include "tools/bench/anchor_rows.h"
#include "tools/bench/bench_compiler.h"
#include "tools/bench/kernel_batch.h"
#include "tools/bench/sweep_details.h"
#include "tools/bench/torch_times.h"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using synth::Config;
using synth::KernelGenerator;
// The anchor rows (target ids "synth-sweep-<row>"), their inputs and the enumeration of a
// family's valid configs live in anchor_rows.h, shared with kforge-bench-search.
using bench::AnchorRow;
using bench::Enumeration;
using bench::TorchTimes;

constexpr char kTargetIdPrefix[] = "synth-sweep-";

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// ---------------------------------------------------------------------------------------
// The rows as JSON for torch_compile_times.py (common/torch_rows.h). Anchor rows are single
// aten nodes whose arguments name their inputs, which TorchRow always converts.
json RowsJson(const std::vector<AnchorRow>& rows) {
  json out = json::array();
  for (const AnchorRow& row : rows) {
    std::vector<std::string> fills;
    for (bench::Fill fill : row.fills) fills.push_back(bench::FillName(fill));
    out.push_back(TorchRow(row.target, row.id, row.label, fills).value());
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// One row's sweep state.

struct Kernel {  // one distinct generated kernel (several configs may share one)
  v1::Candidate candidate;
  v1::CompileResult compiled;   // for a batched kernel: status, log and its entries' resources
  std::vector<size_t> configs;  // indexes into Row::configs
  bool carried = false;         // quick result read from an earlier run's --details (carried_line)
  bench::DetailsLine carried_line;
  size_t batch = SIZE_MAX;      // index into Row::batches (SIZE_MAX: carried or not swept)
  bool in_batch_cubin = false;  // compiled as part of its batch's program (else on its own)
  std::string batch_plan_json;  // its launch plan with the batch's entry names
};

// Kernels compiled as one NVRTC program (kernel_batch.h); the cubin holds all of them.
struct Batch {
  std::vector<size_t> kernels;  // indexes into Row::kernels
  size_t sources = 0;           // distinct sources among them (what NVRTC compiles)
  size_t source_bytes = 0;      // theirs together: the compile policy caps a program's
  std::string cubin;
};

// A batch's program is its members' sources, each wrapped (kernel_batch.h): below the compile
// policy's limit with room for the wrapping.
constexpr size_t kBatchSourceBytes = kMaxSourceBytes - 16 * 1024;

struct QuickResult {
  std::string verdict;  // "PASS", "MISMATCH", "LAUNCH_ERROR", "CRASH", ...
  std::string message;
  double median_s = 0;
  int reps = 0;
  bool pruned = false;  // stopped after one rep: far slower than the best so far
  double max_normalized = 0;
  bool graph = false;  // timed as CUDA-graph replays, per launch (a launch-bound row)
};

struct FullResult {
  size_t kernel = 0;
  v1::EvaluationResult result;
};

struct Row {
  AnchorRow anchor;
  std::string family;
  std::unique_ptr<KernelGenerator> generator;
  Enumeration enumeration;
  std::vector<Config> configs;    // the swept configs (all valid ones, or the prior's best N)
  std::vector<size_t> kernel_of;  // config -> kernel
  std::vector<Kernel> kernels;
  std::vector<Batch> batches;
  size_t carried_configs = 0;           // configs whose quick result came from --details (--resume)
  size_t stale_configs = 0;  // in --details, but the config's kernel is no longer the one swept
  std::atomic<int> batch_fallbacks{0};  // batches compiled member by member
  std::string error;                    // why the row could not be swept
  // --configs without --priors sweeps its configs only: the space is not enumerated (seconds
  // of a GPU call per row), and the tables show its counts as "—".
  bool enumerated = false;
  double enumerate_s = 0, generate_s = 0, compile_s = 0, quick_s = 0, full_s = 0;
  // Compile bookkeeping (CompilePool's mutex guards it).
  size_t compiles_left = 0;
  std::vector<bool> batch_done;  // per batch: compiled (or skipped)
  size_t configs_compiled = 0;
  bool compile_started = false;
  Clock::time_point compile_start;
  // GPU results.
  std::vector<QuickResult> quick;  // per kernel
  QuickResult quick_eager;
  std::vector<FullResult> full;
  std::optional<size_t> winner;  // index into full
  int64_t compiled_ok = 0;
  Clock::time_point compile_deadline = Clock::time_point::max();  // later compiles are skipped
  bool done = false;  // swept (or given up on): the table shows its results
};

std::string DescribeConfig(const Config& c) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : c.values()) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, " ");
}

// The order configs are compiled and timed in: the cost-model prior's best first, alternating
// with seeded uniform picks from the rest. A capped (--max-configs) or time-boxed sweep then
// covers the region the prior likes and, evenly, the space it may misjudge.
std::vector<Config> SweepOrder(const KernelGenerator& generator, const std::vector<Config>& valid,
                               uint64_t seed) {
  std::vector<std::pair<double, size_t>> by_prior;
  for (size_t i = 0; i < valid.size(); ++i) {
    by_prior.emplace_back(generator.EstimateSeconds(valid[i]), i);
  }
  std::stable_sort(by_prior.begin(), by_prior.end());
  std::vector<size_t> rest;  // prior ranks, shuffled
  for (size_t i = 0; i < by_prior.size(); ++i) rest.push_back(i);
  synth::SeededRng rng(seed);
  rng.Shuffle(rest);
  std::vector<bool> taken(valid.size(), false);
  std::vector<Config> out;
  size_t head = 0, random = 0;
  while (out.size() < valid.size()) {
    const bool from_head = out.size() % 2 == 0;
    size_t rank = 0;
    if (from_head) {
      while (taken[head]) ++head;
      rank = head;
    } else {
      while (taken[rest[random]]) ++random;
      rank = rest[random];
    }
    taken[rank] = true;
    out.push_back(valid[by_prior[rank].second]);
  }
  return out;
}

struct PrepareOptions {
  int max_configs = 0;
  uint64_t seed = 1234;
  bench::Shard shard;
  int batch_size = 8;
  std::string resume_dir;    // --resume: carry the configs finished in this --details dir
  bool finish_only = false;  // --finish: sweep nothing new
  std::vector<std::string> configs;  // --configs: sweep exactly these (config strings)
  std::map<std::string, std::string> where;  // --where: only configs with these values
  std::string sources_dir;  // --sources: write each kernel's source and plan here
  std::string priors_path;  // --priors: append each valid config's prior here, sweep nothing
};

// Distinct sources NVRTC compiles for the row (kernels sharing a source compile once).
size_t SourcesToCompile(const Row& row) {
  size_t sources = 0;
  for (const Batch& b : row.batches) sources += b.sources;
  return sources;
}

// Binds, enumerates, orders (and caps), shards and generates one row, carries the results of
// earlier runs and groups the kernels still to compile into batches (CPU only).
void PrepareRow(Row& row, const synth::GpuModel& gpu, const PrepareOptions& options) {
  const int max_configs = options.max_configs;
  const uint64_t seed = options.seed;
  const v1::Target& target = row.anchor.target;
  std::string refusal;
  const synth::Family* family = synth::FamilyRegistry::Default().Find(target, &refusal);
  if (family == nullptr) {
    row.error = absl::StrCat("no synthesizer family covers it: ", refusal);
    return;
  }
  row.family = family->Name();
  absl::StatusOr<std::unique_ptr<KernelGenerator>> generator = family->Bind(target, gpu);
  if (!generator.ok()) {
    row.error = absl::StrCat(row.family, " refuses it: ", generator.status().message());
    return;
  }
  row.generator = std::move(*generator);
  row.enumerated = options.configs.empty() || !options.priors_path.empty();
  if (row.enumerated) {
    Clock::time_point start = Clock::now();
    absl::StatusOr<Enumeration> e = bench::Enumerate(*row.generator);
    row.enumerate_s = Seconds(start);
    if (!e.ok()) {
      row.error = std::string(e.status().message());
      return;
    }
    row.enumeration = std::move(*e);
  }
  if (!options.priors_path.empty()) {
    std::ofstream priors(options.priors_path, std::ios::app);
    for (const Config& c : row.enumeration.valid) {
      priors << row.anchor.id << '\t' << c.ToString() << '\t'
             << row.generator->EstimateSeconds(c) * 1e6 << '\n';
    }
    return;
  }
  if (!options.configs.empty()) {
    for (const std::string& text : options.configs) {
      absl::StatusOr<Config> c = row.generator->Space().Parse(text);
      if (c.ok()) *c = row.generator->Canonicalize(*c);
      std::string why = c.ok() ? row.generator->Check(*c) : std::string(c.status().message());
      if (!why.empty()) {
        row.error = absl::StrCat("--configs '", text, "' is not a valid ", row.family,
                                 " config: ", why);
        return;
      }
      row.configs.push_back(*std::move(c));
    }
  } else {
    row.configs = SweepOrder(*row.generator, row.enumeration.valid, seed);
    std::erase_if(row.configs, [&](const Config& c) {
      return absl::c_any_of(options.where,
                            [&](const auto& kv) { return c.Get(kv.first) != kv.second; });
    });
    if (max_configs > 0 && static_cast<int>(row.configs.size()) > max_configs) {
      row.configs.resize(static_cast<size_t>(max_configs));
    }
  }
  if (options.shard.count > 1) {
    std::vector<Config> mine;
    for (size_t i = 0; i < row.configs.size(); ++i) {
      if (options.shard.Contains(row.configs[i].ToString())) {
        mine.push_back(std::move(row.configs[i]));
      }
    }
    row.configs = std::move(mine);
  }
  std::map<std::string, bench::DetailsLine> finished;
  if (!options.resume_dir.empty()) {
    absl::StatusOr<std::map<std::string, bench::DetailsLine>> read =
        bench::ReadFinishedDetails(options.resume_dir, row.anchor.id);
    if (!read.ok()) {
      row.error = std::string(read.status().message());
      return;
    }
    finished = std::move(*read);
  }
  // A quick result belongs to a kernel (source + launch plan) on this row's inputs, not to
  // the config string that named it: a config carries the finished line of any config that
  // generated the same kernel. So a new parameter whose default leaves the kernels alone
  // re-sweeps nothing, though it changes every config string.
  std::map<std::string, const bench::DetailsLine*> finished_by_digest;
  for (const auto& [config, line] : finished) {
    if (!line.kernel_sha256.empty()) finished_by_digest.emplace(line.kernel_sha256, &line);
  }
  const Clock::time_point start = Clock::now();
  std::map<std::string, size_t> by_digest;
  for (size_t i = 0; i < row.configs.size(); ++i) {
    absl::StatusOr<synth::GeneratedKernel> k = row.generator->Generate(row.configs[i]);
    if (!k.ok()) {
      row.error =
          absl::StrCat("Generate(", row.configs[i].ToString(), ") failed: ", k.status().message());
      return;
    }
    const std::string digest = Sha256Hex(k->source + "\n" + k->launch_plan_json);
    auto [it, fresh] = by_digest.emplace(digest, row.kernels.size());
    if (fresh) {
      Kernel kernel;
      kernel.candidate.set_id(digest);
      kernel.candidate.set_source(std::move(k->source));
      kernel.candidate.set_launch_plan_json(std::move(k->launch_plan_json));
      kernel.candidate.set_proposer(absl::StrCat("synth:", row.family));
      for (const auto& [name, value] : row.configs[i].values()) {
        (*kernel.candidate.mutable_params())[name] = value;
      }
      if (!options.sources_dir.empty()) {
        const std::string stem = absl::StrCat(options.sources_dir, "/", row.anchor.id, ".",
                                              row.kernels.size());
        std::ofstream(stem + ".cu") << "// " << row.configs[i].ToString() << "\n"
                                    << kernel.candidate.source();
        std::ofstream(stem + ".plan.json") << kernel.candidate.launch_plan_json() << "\n";
      }
      row.kernels.push_back(std::move(kernel));
    }
    Kernel& kernel = row.kernels[it->second];
    kernel.configs.push_back(i);
    row.kernel_of.push_back(it->second);
    if (fresh) {
      auto same = finished_by_digest.find(digest);
      if (same != finished_by_digest.end()) {
        kernel.carried = true;
        kernel.carried_line = *same->second;
      } else if (finished.count(row.configs[i].ToString()) > 0) {
        ++row.stale_configs;  // its kernel changed since: swept again
      }
    }
    if (kernel.carried) ++row.carried_configs;
  }
  // The kernels still to compile, in sweep order, in batches of `batch_size` sources. Kernels
  // whose source an earlier one has (configs that differ only in their launch plan) join its
  // batch, which compiles that source once for all of them (kernel_batch.h).
  const size_t batch_size = static_cast<size_t>(std::max(1, options.batch_size));
  std::unordered_map<size_t, size_t> batch_of_source;  // source hash -> batch
  for (size_t k = 0; k < row.kernels.size(); ++k) {
    Kernel& kernel = row.kernels[k];
    if (kernel.carried) {
      kernel.compiled.set_status(kernel.carried_line.compile == "COMPILE_OK" ? v1::COMPILE_OK
                                                                             : v1::COMPILE_FAILED);
      continue;
    }
    if (options.finish_only) {
      kernel.compiled.set_log("not swept: --finish sweeps nothing new");
      continue;
    }
    const size_t source_hash = std::hash<std::string>{}(kernel.candidate.source());
    if (auto shared = batch_of_source.find(source_hash); shared != batch_of_source.end()) {
      kernel.batch = shared->second;
      row.batches[kernel.batch].kernels.push_back(k);
      continue;
    }
    const size_t bytes = kernel.candidate.source().size();
    if (row.batches.empty() || row.batches.back().sources >= batch_size ||
        row.batches.back().source_bytes + bytes > kBatchSourceBytes) {
      row.batches.emplace_back();
    }
    kernel.batch = row.batches.size() - 1;
    row.batches.back().kernels.push_back(k);
    ++row.batches.back().sources;
    row.batches.back().source_bytes += bytes;
    batch_of_source[source_hash] = kernel.batch;
  }
  row.generate_s = Seconds(start);
}

// ---------------------------------------------------------------------------------------
// Compilation: one pool of threads works through every row's kernels in row order, so the
// GPU phase of row r overlaps the compiles of the rows after it.

class CompilePool {
 public:
  CompilePool(Compiler* compiler, v1::CompileOptions options, int threads)
      : compiler_(compiler), options_(std::move(options)) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~CompilePool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    work_ready_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void Add(Row* row) {
    std::lock_guard<std::mutex> lock(mu_);
    row->compiles_left = row->batches.size();
    row->batch_done.assign(row->batches.size(), false);
    for (size_t b = 0; b < row->batches.size(); ++b) queue_.push_back({row, b});
    work_ready_.notify_all();
  }

  // Blocks until batches [0, upto) of `row` are compiled; prints progress meanwhile.
  void Wait(Row& row, size_t upto) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] {
      for (size_t b = 0; b < upto && b < row.batch_done.size(); ++b) {
        if (!row.batch_done[b]) return false;
      }
      return true;
    };
    while (!ready()) {
      if (row_done_.wait_for(lock, std::chrono::seconds(3)) == std::cv_status::timeout &&
          !ready() && row.compile_started) {
        const double s = std::max(Seconds(row.compile_start), 1e-9);
        std::fprintf(stderr, "  %s: compiled %zu/%zu configs (%.1f configs/s)\n",
                     row.anchor.id.c_str(), row.configs_compiled, row.configs.size(),
                     row.configs_compiled / s);
      }
    }
  }

 private:
  struct Item {
    Row* row;
    size_t batch;
  };

  // Compiles the batch's kernels as one program; a batch that fails (one bad member fails
  // them all) is compiled member by member, so every kernel gets its own verdict and log.
  void CompileBatch(Row& row, size_t b) {
    Batch& batch = row.batches[b];
    if (batch.kernels.size() > 1) {
      std::vector<bench::BatchMember> members;
      for (size_t k : batch.kernels) {
        members.push_back(
            {row.kernels[k].candidate.source(), row.kernels[k].candidate.launch_plan_json()});
      }
      absl::StatusOr<bench::KernelBatch> merged = bench::BatchKernels(members);
      if (merged.ok()) {
        v1::Candidate candidate;
        candidate.set_source(merged->source);
        v1::CompileResult result = compiler_->Compile(candidate, options_);
        bool complete = result.status() == v1::COMPILE_OK;
        std::map<std::string, const v1::KernelResources*> by_entry;
        for (const v1::KernelResources& r : result.kernels()) by_entry[r.entry_point()] = &r;
        for (size_t m = 0; m < members.size() && complete; ++m) {
          for (const std::string& renamed : merged->launched[m]) {
            complete = complete && by_entry.count(renamed) > 0;
          }
        }
        if (complete) {
          for (size_t m = 0; m < members.size(); ++m) {
            Kernel& k = row.kernels[batch.kernels[m]];
            k.compiled.set_status(v1::COMPILE_OK);
            k.compiled.set_arch(result.arch());
            k.compiled.set_compiler_version(result.compiler_version());
            for (const auto& [original, renamed] : merged->entries[m]) {
              if (!by_entry.count(renamed)) continue;  // not compiled: under a false #if
              v1::KernelResources* r = k.compiled.add_kernels();
              *r = *by_entry[renamed];
              r->set_entry_point(original);
            }
            k.batch_plan_json = std::move(merged->plans[m]);
            k.in_batch_cubin = true;
          }
          batch.cubin = std::move(*result.mutable_cubin());
          return;
        }
      }
      // One member's error fails the whole program (or the batch could not be formed):
      // noted, then every member alone.
      if (row.batch_fallbacks++ == 0) {
        std::fprintf(stderr, "  %s: batch %zu compiled member by member (%s)\n",
                     row.anchor.id.c_str(), b,
                     merged.ok() ? "the batched program failed"
                                 : std::string(merged.status().message()).c_str());
      }
    }
    for (size_t k : batch.kernels) {
      Kernel& kernel = row.kernels[k];
      kernel.compiled = compiler_->Compile(kernel.candidate, options_);
      kernel.compiled.clear_ptx();  // the quick pass loads the cubin; PTX is only memory here
      kernel.in_batch_cubin = false;
    }
  }

  void Work() {
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_ready_.wait(lock, [&] { return closing_ || next_ < queue_.size(); });
        if (next_ >= queue_.size()) return;
        item = queue_[next_++];
        if (!item.row->compile_started) {
          item.row->compile_started = true;
          item.row->compile_start = Clock::now();
        }
      }
      Batch& batch = item.row->batches[item.batch];
      if (Clock::now() < item.row->compile_deadline) {
        CompileBatch(*item.row, item.batch);  // writes only this batch's kernels
      } else {
        for (size_t k : batch.kernels) {
          item.row->kernels[k].compiled.set_log(
              "skipped: the compile deadline of --time-budget-s had passed");
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t k : batch.kernels)
        item.row->configs_compiled += item.row->kernels[k].configs.size();
      item.row->batch_done[item.batch] = true;
      row_done_.notify_all();
      if (--item.row->compiles_left == 0) {
        item.row->compile_s = Seconds(item.row->compile_start);
        row_done_.notify_all();
      }
    }
  }

  Compiler* compiler_;
  v1::CompileOptions options_;
  std::mutex mu_;
  std::condition_variable work_ready_, row_done_;
  std::vector<Item> queue_;
  size_t next_ = 0;
  bool closing_ = false;
  std::vector<std::thread> workers_;
};

// ---------------------------------------------------------------------------------------
// GPU phase.

absl::Status WriteFile(const std::filesystem::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

struct QuickOptions {
  std::string child;  // kforge-synth-sweep-quick
  int reps = 5;
  double prune_factor = 2.0;
  double startup_s = 60;
};

// The row's kernels that passed the quick pass with a time (pruned ones ran one rep only),
// fastest first, as (median seconds, kernel index).
std::vector<std::pair<double, size_t>> RankedQuick(const Row& row) {
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t k = 0; k < row.quick.size(); ++k) {
    const QuickResult& q = row.quick[k];
    if (q.verdict == "PASS" && !q.pruned && q.median_s > 0) ranked.emplace_back(q.median_s, k);
  }
  std::sort(ranked.begin(), ranked.end());
  return ranked;
}

// The results a quick-pass child appended to `path` so far: "KFQ {json}" lines.
std::vector<json> ReadQuickResults(const std::filesystem::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view view(line);
    if (!absl::ConsumePrefix(&view, "KFQ ")) continue;
    json r = json::parse(view.begin(), view.end(), nullptr, /*allow_exceptions=*/false);
    if (!r.is_discarded() && r.is_object()) out.push_back(std::move(r));
  }
  return out;
}

// Runs the quick pass over every compiled kernel of `row` in kforge-synth-sweep-quick
// children. Each appends one result line per kernel to a file, so a kernel that takes its
// child's CUDA context down is recorded as CRASH and a fresh child carries on after it.
// The quick results known before the GPU runs: carried ones (--resume) and kernels that are
// not swept this run (--finish).
void InitQuick(Row& row) {
  row.quick.assign(row.kernels.size(), QuickResult{});
  for (size_t k = 0; k < row.kernels.size(); ++k) {
    const Kernel& kernel = row.kernels[k];
    QuickResult& q = row.quick[k];
    if (kernel.carried) {
      q.verdict = kernel.carried_line.quick_verdict;
      q.message = kernel.carried_line.message;
      q.median_s = kernel.carried_line.quick_us * 1e-6;
      q.reps = kernel.carried_line.reps;
      q.pruned = kernel.carried_line.pruned;
      q.max_normalized = kernel.carried_line.max_normalized;
    } else if (kernel.batch == SIZE_MAX) {
      q.verdict = "SKIPPED";
      q.message = kernel.compiled.log();
    }
  }
}

// Runs the quick pass over `kernels` of `row` (compiled ones; the others get their compile
// verdict) in kforge-synth-sweep-quick children.
absl::Status QuickPass(Row& row, const std::vector<size_t>& kernels, const std::string& inputs,
                       const std::filesystem::path& dir, const QuickOptions& options) {
  std::error_code cleared;
  std::filesystem::remove_all(dir, cleared);  // the previous chunk's cubins and results
  std::filesystem::create_directories(dir);
  KF_RETURN_IF_ERROR(WriteFile(dir / "target.pb", row.anchor.target.SerializeAsString()));
  KF_RETURN_IF_ERROR(WriteFile(dir / "inputs.pt", inputs));
  json jobs = json::array();
  std::vector<size_t> job_kernel;
  std::vector<bool> batch_written(row.batches.size(), false);
  size_t configs = 0;
  for (size_t k : kernels) {
    const Kernel& kernel = row.kernels[k];
    const v1::CompileResult& c = kernel.compiled;
    configs += kernel.configs.size();
    if (c.status() == v1::COMPILE_STATUS_UNSPECIFIED) {
      row.quick[k].verdict = "SKIPPED";
      row.quick[k].message = c.log();
      continue;
    }
    if (c.status() != v1::COMPILE_OK) {
      row.quick[k].verdict = "COMPILE_ERROR";
      row.quick[k].message = c.log().substr(0, 300);
      continue;
    }
    if (kernel.in_batch_cubin) {  // one cubin for the batch, its entries renamed
      const std::string file = absl::StrCat("b", kernel.batch, ".cubin");
      if (!batch_written[kernel.batch]) {
        KF_RETURN_IF_ERROR(WriteFile(dir / file, row.batches[kernel.batch].cubin));
        batch_written[kernel.batch] = true;
      }
      jobs.push_back({{"cubin", file}, {"plan", kernel.batch_plan_json}});
    } else {
      const std::string file = absl::StrCat("k", k, ".cubin");
      KF_RETURN_IF_ERROR(WriteFile(dir / file, c.cubin()));
      jobs.push_back({{"cubin", file}, {"plan", kernel.candidate.launch_plan_json()}});
    }
    job_kernel.push_back(k);
  }
  json manifest = {{"jobs", jobs}, {"reps", options.reps}, {"prune_factor", options.prune_factor}};
  // The best time of the row's earlier chunks, so pruning does not start over in each child.
  const std::vector<std::pair<double, size_t>> ranked = RankedQuick(row);
  if (!ranked.empty()) manifest["best_s"] = ranked.front().first;
  // The row's timing mode, once a child chose it from eager's time: every chunk and restart
  // times alike, so the row's times compare (details resumed from before the mode existed are
  // single launches).
  if (row.quick_eager.verdict == "PASS") manifest["graph"] = row.quick_eager.graph;
  KF_RETURN_IF_ERROR(WriteFile(dir / "manifest.json", manifest.dump()));

  const size_t n = job_kernel.size();
  if (n == 0) {  // a chunk whose batches the compile budget left out: nothing to time
    std::fprintf(stderr, "  %s: quick pass of %zu configs: none compiled, nothing to time\n",
                 row.anchor.id.c_str(), configs);
    return absl::OkStatus();
  }
  auto configs_before = [&](size_t job) {  // configs covered by jobs [0, job)
    size_t c = 0;
    for (size_t j = 0; j < job && j < n; ++j) c += row.kernels[job_kernel[j]].configs.size();
    return c;
  };
  size_t start = 0;
  int restarts = 0;
  Clock::time_point begin = Clock::now();
  while (start < n) {
    const std::filesystem::path results = dir / absl::StrCat("results-", start, ".jsonl");
    SubprocessOptions sub;
    // Start-up (inputs, float64 reference) plus a generous quarter second per kernel: a hung
    // kernel costs this much once, then the child restarts after it.
    sub.time_limit = absl::Seconds(options.startup_s + 0.25 * static_cast<double>(n - start));
    sub.max_stderr_bytes = 16 << 10;
    const std::vector<std::string> argv = {options.child, dir.string(), std::to_string(start),
                                           results.string()};
    auto child =
        std::async(std::launch::async, [&argv, &sub] { return RunSubprocess(argv, "", sub); });
    while (child.wait_for(std::chrono::seconds(3)) != std::future_status::ready) {
      const size_t got = start + ReadQuickResults(results).size();
      std::fprintf(stderr, "  %s: quick pass %zu/%zu configs (%.1f configs/s)\n",
                   row.anchor.id.c_str(), configs_before(got), configs,
                   configs_before(got) / std::max(Seconds(begin), 1e-9));
    }
    absl::StatusOr<SubprocessResult> run = child.get();
    if (!run.ok()) return run.status();
    const std::vector<json> lines = ReadQuickResults(results);
    if (lines.empty() && run->term_signal == 0 && !run->timed_out && run->exit_code != 3) {
      // Nothing reported and no fault: it never got going (a missing libcuda, say).
      return absl::FailedPreconditionError(
          absl::StrCat("the quick-pass child ", options.child, " exited with ", run->exit_code,
                       " before its first result: ", run->stderr_data));
    }
    size_t next = start;
    for (const json& r : lines) {
      QuickResult q;
      q.verdict = r.value("verdict", "");
      q.message = r.value("message", "");
      q.median_s = r.value("median_s", 0.0);
      q.reps = r.value("reps", 0);
      q.pruned = r.value("pruned", false);
      q.max_normalized = r.value("max_normalized", 0.0);
      q.graph = r.value("graph", false);
      const int64_t job = r.value("job", int64_t{-2});
      if (job == -1) {
        row.quick_eager = q;
      } else if (job >= 0 && static_cast<size_t>(job) < n) {
        row.quick[job_kernel[job]] = q;
        next = std::max(next, static_cast<size_t>(job) + 1);
      }
    }
    if (next >= n) break;
    if (run->exit_code == 0 && !run->timed_out) {
      return absl::InternalError(absl::StrCat("the quick-pass child stopped at kernel ", next,
                                              " of ", n,
                                              " without saying why: ", run->stderr_data));
    }
    if (run->exit_code == 3 && !run->timed_out) {
      // It reported the kernel that took its context down (CRASH) and left: carry on after it.
      std::fprintf(stderr,
                   "  %s: the quick-pass child lost its CUDA context; restarting at "
                   "kernel %zu\n",
                   row.anchor.id.c_str(), next);
    } else {
      // Died (a fault that killed the process) or hung: the kernel it was on takes the blame.
      const std::string tail = run->stderr_data.substr(
          run->stderr_data.size() > 400 ? run->stderr_data.size() - 400 : 0);
      QuickResult& blamed = row.quick[job_kernel[next]];
      blamed.verdict = run->timed_out ? "TIMEOUT" : "CRASH";
      blamed.message = absl::StrCat("the quick-pass child ", run->timed_out ? "timed out" : "died",
                                    " on this kernel (exit ", run->exit_code, ", signal ",
                                    run->term_signal, "): ", tail);
      std::fprintf(stderr, "  %s: the quick-pass child %s on kernel %zu; restarting after it\n",
                   row.anchor.id.c_str(), blamed.verdict.c_str(), next);
      ++next;
    }
    if (++restarts > 25) {
      for (size_t j = next; j < n; ++j) {
        row.quick[job_kernel[j]].verdict = "NOT_EVALUATED";
        row.quick[job_kernel[j]].message = "too many quick-pass children died";
      }
      break;
    }
    start = next;
  }
  std::fprintf(stderr,
               "  %s: quick pass of %zu configs in %.1f s (%.1f configs/s); eager %.2f us "
               "by the same method\n",
               row.anchor.id.c_str(), configs, Seconds(begin),
               configs / std::max(Seconds(begin), 1e-9), row.quick_eager.median_s * 1e6);
  return absl::OkStatus();
}

// The best `top` quick-pass kernels through the worker's full validation and timing; more
// further down the ranking when they fail, up to 3 * top evaluations.
void FullValidation(Row& row, EvaluationPipeline& pipeline, const std::string& inputs,
                    const std::string& arch, int top, bool shape_generic) {
  const std::vector<std::pair<double, size_t>> ranked = RankedQuick(row);
  int passed = 0;
  for (size_t i = 0; i < ranked.size() && passed < top && static_cast<int>(i) < 3 * top; ++i) {
    v1::EvaluateRequest request;
    *request.mutable_target() = row.anchor.target;
    request.mutable_target()->set_shape_generic(shape_generic);
    *request.mutable_candidate() = row.kernels[ranked[i].second].candidate;
    request.mutable_options()->set_arch(arch);
    *request.mutable_policy() = DefaultValidationPolicy();
    request.set_timing(true);
    v1::EvaluationResult r = pipeline.Evaluate(request, inputs);
    std::fprintf(stderr,
                 "  %s: full validation of quick #%zu (%.2f us): %s %.2f us (eager %.2f us) %s\n",
                 row.anchor.id.c_str(), i + 1, ranked[i].first * 1e6,
                 v1::Verdict_Name(r.verdict()).c_str(), r.candidate().median_s() * 1e6,
                 r.eager().median_s() * 1e6, r.diagnostics().message().substr(0, 200).c_str());
    row.full.push_back({ranked[i].second, r});
    if (r.verdict() == v1::PASS) {
      ++passed;
      const size_t idx = row.full.size() - 1;
      if (!row.winner ||
          r.candidate().median_s() < row.full[*row.winner].result.candidate().median_s()) {
        row.winner = idx;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Output.

std::string Us(double s) { return s > 0 ? absl::StrFormat("%.1f", s * 1e6) : "—"; }
std::string Ratio(double num, double den) {
  return num > 0 && den > 0 ? absl::StrFormat("%.2f×", num / den) : "—";
}

// A count of the row's enumeration, or "—" where the row was not enumerated (--configs).
std::string EnumeratedCount(const Row& row, double count) {
  return row.enumerated ? absl::StrFormat("%.0f", count) : "—";
}

// Configs of `row` whose kernel got `verdict` in the quick pass ("" counts every timed one).
int64_t CountQuick(const Row& row, const std::string& verdict) {
  int64_t n = 0;
  for (size_t c = 0; c < row.configs.size(); ++c) {
    const size_t k = row.kernel_of[c];
    if (k >= row.quick.size()) continue;
    const std::string& v = row.quick[k].verdict;
    const bool timed = !v.empty() && v != "SKIPPED" && v != "COMPILE_ERROR" && v != "NOT_EVALUATED";
    if (verdict.empty() ? timed : v == verdict) ++n;
  }
  return n;
}

int64_t CountCompiled(const Row& row, bool ok) {
  int64_t n = 0;
  for (size_t c = 0; c < row.configs.size(); ++c) {
    const v1::CompileStatus s = row.kernels[row.kernel_of[c]].compiled.status();
    if (ok ? s == v1::COMPILE_OK : (s != v1::COMPILE_OK && s != v1::COMPILE_STATUS_UNSPECIFIED)) {
      ++n;
    }
  }
  return n;
}

struct TableContext {
  bool compile_only = false;
  const std::map<std::string, TorchTimes>* torch = nullptr;
  v1::GpuInfo gpu;
  double total_s = 0;
  int max_configs = 0;
  double budget_s = 0;
  bool final = true;
  bool quick_only = false;
  std::string coverage;  // how the configs were split and carried (shards, --resume)
};

std::string CompileOnlyTable(const std::vector<std::unique_ptr<Row>>& rows,
                             const TableContext& ctx) {
  std::string out =
      "| op, shape, dtype | family | product space | canonical | valid | to sweep | kernels | "
      "sources | compiled | compile failed | enumerate s | compile s |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  int64_t valid = 0, compiled = 0;
  for (const auto& r : rows) {
    if (!r->error.empty()) {
      absl::StrAppend(&out, "| ", r->anchor.label, " | ", r->family, " | ", r->error,
                      " | | | | | | | | | |\n");
      continue;
    }
    valid += static_cast<int64_t>(r->enumeration.valid.size());
    compiled += CountCompiled(*r, true);
    absl::StrAppendFormat(&out,
                          "| %s | %s | %s | %s | %s | %d | %d | %d | %d | %d | %.2f | %.1f |\n",
                          r->anchor.label, r->family, EnumeratedCount(*r, r->enumeration.product),
                          EnumeratedCount(*r, r->enumeration.canonical),
                          EnumeratedCount(*r, r->enumeration.valid.size()), r->configs.size(),
                          r->kernels.size(), SourcesToCompile(*r), CountCompiled(*r, true),
                          CountCompiled(*r, false), r->enumerate_s, r->compile_s);
  }
  absl::StrAppendFormat(
      &out,
      "\n%d valid configs in all, %d compiled; total %.1f s (enumerate + "
      "generate + compile%s%s).\n",
      valid, compiled, ctx.total_s,
      ctx.max_configs > 0 ? absl::StrCat(", at most ", ctx.max_configs, " configs per row") : "",
      ctx.budget_s > 0 ? absl::StrCat(", time budget ", ctx.budget_s, " s") : "");
  return out;
}

std::string Table(const std::vector<std::unique_ptr<Row>>& rows, const TableContext& ctx) {
  if (ctx.compile_only) return CompileOnlyTable(rows, ctx);
  const v1::GpuInfo& gpu = ctx.gpu;
  std::string out;
  absl::StrAppendFormat(
      &out,
      "Synthesizer sweep on %s (%s, %d SMs, measured copy bandwidth %.2f TB/s)%s. Eager and "
      "best synth: the worker's full validation + timing (interleaved, L2 flushed, median); "
      "torch.compile and \"py eager\": tools/bench/torch_compile_times.py (CUDA events, L2 "
      "flushed, interleaved, median).\n\n",
      gpu.name(), gpu.arch(), gpu.sm_count(), gpu.copy_bandwidth_bytes_per_s() / 1e12,
      ctx.final ? "" : " — IN PROGRESS");
  absl::StrAppend(
      &out,
      "| op, shape, dtype | configs swept | valid | quick pass | eager µs | py eager µs | "
      "torch.compile µs | max-autotune µs | best synth µs | speedup vs eager | vs torch.compile | "
      "floor µs | % of floor | best config (params) | sweep s |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "| --- | ---: |\n");
  for (const auto& r : rows) {
    const TorchTimes* t =
        ctx.torch && ctx.torch->count(r->anchor.id) ? &ctx.torch->at(r->anchor.id) : nullptr;
    const double tc = t && t->compiled_s.count("default") ? t->compiled_s.at("default") : 0;
    const double tma = t && t->compiled_s.count("max-autotune-no-cudagraphs")
                           ? t->compiled_s.at("max-autotune-no-cudagraphs")
                           : 0;
    const double floor = FloorSeconds(r->anchor.target, gpu);
    if (!r->error.empty() || !r->done) {
      absl::StrAppend(
          &out, "| ", r->anchor.label, " | — | ",
          r->enumeration.valid.empty() ? "—" : std::to_string(r->enumeration.valid.size()),
          " | — | — | ", Us(t ? t->eager_s : 0), " | ", Us(tc), " | ", Us(tma), " | — | — | — | ",
          Us(floor), " | — | ", r->error.empty() ? "not reached yet" : r->error, " | — |\n");
      continue;
    }
    double eager = 0, best = 0, eval_floor = 0, one_set_graph = 0;
    std::string config = "no quick-pass winner", mode;
    if (r->winner) {
      const FullResult& w = r->full[*r->winner];
      eager = w.result.eager().median_s();
      best = w.result.candidate().median_s();
      mode = w.result.candidate().mode();
      eval_floor = w.result.floor_s();
      if (w.kernel < r->quick.size() && r->quick[w.kernel].verdict == "PASS" &&
          r->quick[w.kernel].graph) {
        one_set_graph = r->quick[w.kernel].median_s;
      }
      const Kernel& k = r->kernels[w.kernel];
      config = DescribeConfig(r->configs[k.configs.front()]);
      if (k.configs.size() > 1) {
        absl::StrAppend(&config, " (+", k.configs.size() - 1, " configs, same kernel)");
      }
      absl::StrAppendFormat(&config, "; CI %.1f–%.1f µs, %s", w.result.candidate().ci_low_s() * 1e6,
                            w.result.candidate().ci_high_s() * 1e6, w.result.candidate().mode());
    } else if (ctx.quick_only) {
      // The quick pass's times are all a --quick-only run has: its fastest, with eager's time
      // by the same method, so that a run without --details still reports what it measured.
      config = "not validated: --quick-only (the --finish run validates)";
      const std::vector<std::pair<double, size_t>> ranked = RankedQuick(*r);
      if (!ranked.empty()) {
        const auto [fastest_s, fastest] = ranked.front();
        absl::StrAppend(&config, "; fastest in the quick pass ", Us(fastest_s), " µs, eager ",
                        Us(r->quick_eager.verdict == "PASS" ? r->quick_eager.median_s : 0),
                        " µs: ", DescribeConfig(r->configs[r->kernels[fastest].configs.front()]));
      }
    } else if (!r->full.empty()) {
      eager = r->full.front().result.eager().median_s();
      const auto& d = r->full.front().result;
      config = absl::StrCat("none of ", r->full.size(),
                            " passed full validation (first: ", v1::Verdict_Name(d.verdict()), " ",
                            d.diagnostics().message().substr(0, 120), ")");
    }
    const double shown_floor = eval_floor > 0 ? eval_floor : floor;
    const double sweep_s = r->enumerate_s + r->generate_s + r->compile_s + r->quick_s + r->full_s;
    absl::StrAppendFormat(
        &out, "| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n",
        r->anchor.label, CountQuick(*r, ""), EnumeratedCount(*r, r->enumeration.valid.size()),
        CountQuick(*r, "PASS"), Us(eager), Us(t ? t->eager_s : 0), Us(tc), Us(tma), Us(best),
        Ratio(eager, best), bench::VsTorchCompile(t, best, mode, one_set_graph), Us(shown_floor),
        best > 0 && shown_floor > 0 ? absl::StrFormat("%.0f%%", 100 * shown_floor / best) : "—",
        config, sweep_s);
  }
  absl::StrAppendFormat(
      &out,
      "\nTotal sweep time %.0f s%s%s. \"configs swept\": compiled and timed in the quick pass; "
      "fewer than \"valid\" when the sweep was capped (--max-configs) or time-boxed "
      "(--time-budget-s), which keeps the cost-model prior's best configs interleaved with "
      "seeded random ones. \"quick pass\": correct on one input set. vs torch.compile: "
      "against the faster of its two modes; for a winner the worker timed as CUDA-graph "
      "replays (launch-bound), torch.compile's replays against the winner's quick-pass replays "
      "(\"graph replays, one input set\"), the script's method, where the script timed them "
      "(the worker's own replays rotate cold copies of the inputs). %% of floor = floor / best "
      "synth.\n",
      ctx.total_s,
      ctx.max_configs > 0 ? absl::StrCat(", at most ", ctx.max_configs, " configs per row") : "",
      ctx.budget_s > 0 ? absl::StrCat(", time budget ", ctx.budget_s, " s") : "");
  if (!ctx.coverage.empty()) absl::StrAppend(&out, ctx.coverage, "\n");
  bool notes = false;
  if (ctx.torch) {
    for (const auto& [id, t] : *ctx.torch) {
      if (t.note.empty()) continue;
      if (!notes) absl::StrAppend(&out, "\ntorch.compile notes:\n");
      notes = true;
      absl::StrAppend(&out, "- ", id, ": ", t.note, "\n");
    }
  }
  return out;
}

// Every config of a row that has a quick result (or a reason it has none) with its quick and
// full results, tab-separated.
absl::Status WriteDetails(const Row& row, const std::filesystem::path& dir,
                          const bench::Shard& shard) {
  std::filesystem::create_directories(dir);
  std::string text =
      "config\tkernel\tcompile\tquick_verdict\tquick_us\treps\tpruned\tmax_normalized\tfull_"
      "verdict\tfull_us\tmessage\tkernel_sha256\n";
  std::map<size_t, const FullResult*> full;
  for (const FullResult& f : row.full) full[f.kernel] = &f;
  for (size_t c = 0; c < row.configs.size(); ++c) {
    const size_t k = row.kernel_of[c];
    const QuickResult q = k < row.quick.size() ? row.quick[k] : QuickResult{};
    // Not through the quick pass yet: its batch may still be compiling (do not read it).
    if (q.verdict.empty()) continue;
    const FullResult* f = full.count(k) ? full[k] : nullptr;
    std::string message =
        f && f->result.verdict() != v1::PASS ? f->result.diagnostics().message() : q.message;
    for (char& ch : message) {
      if (ch == '\t' || ch == '\n') ch = ' ';
    }
    absl::StrAppendFormat(
        &text, "%s\t%d\t%s\t%s\t%.3f\t%d\t%d\t%.3g\t%s\t%.3f\t%s\t%s\n",
        row.configs[c].ToString(), k, v1::CompileStatus_Name(row.kernels[k].compiled.status()), q.verdict, q.median_s * 1e6,
        q.reps, q.pruned ? 1 : 0, q.max_normalized, f ? v1::Verdict_Name(f->result.verdict()) : "",
        f ? f->result.candidate().median_s() * 1e6 : 0.0, message.substr(0, 300),
        row.kernels[k].candidate.id());
  }
  if (row.quick_eager.verdict == "PASS" && row.quick_eager.median_s > 0) {
    KF_RETURN_IF_ERROR(
        bench::WriteEagerUs(dir.string(), row.anchor.id, row.quick_eager.median_s * 1e6));
  }
  // Whole or not at all: --resume trusts these files, and a kill may come mid-write.
  return WriteFileAtomically(dir / bench::DetailsFileName(row.anchor.id, shard), text);
}

std::string ExeDir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

int Main(int argc, char** argv) {
  CLI::App app{"kforge-synth-sweep: the synthesizer's exhaustive sweep of GPU.md's anchor rows"};
  std::string rows_filter, out_path, details_dir, torch_path, emit_rows, cache_dir, work_dir;
  std::string shard_text, resume_dir, configs_text, where_text, sources_dir, priors_path;
  int max_configs = 0, top = 3, jobs = 0, reps = 5, seed = 1234, batch = 8, quick_chunk = 2048;
  bool compile_only = false, shape_generic = false, quick_only = false, finish = false,
       resume = false;
  double prune = 2.0, budget_s = 0, reserve_s = -1;
  app.add_option("--rows", rows_filter, "comma-separated anchor row ids or 1-based positions");
  app.add_option("--max-configs", max_configs,
                 "sweep at most N valid configs per row (the prior's best N/2 and N/2 seeded "
                 "random ones); 0: all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--configs", configs_text,
                 "sweep exactly these configs of the --rows row, '|'-separated, each as the "
                 "--details files print it (name=value;name=value...): to re-time or profile "
                 "chosen kernels");
  app.add_option("--where", where_text,
                 "sweep only the valid configs with these values, name=value;name=value "
                 "(split_mode=sync: one way of the space, measured on its own)");
  app.add_option("--time-budget-s", budget_s,
                 "with --max-configs: stop compiling a row once its share of this many seconds "
                 "is spent (rows share it evenly, earlier rows' savings pass on); exhaustive "
                 "(no --max-configs): stop compiling at this many seconds less "
                 "--gpu-reserve-s, leaving the rest to a --resume call; 0: no limit")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch,
                 "configs compiled as one NVRTC program (kernel_batch.h: headers and process "
                 "start paid once; 1: one program per config)")
      ->check(CLI::Range(1, 16));
  app.add_option("--quick-chunk", quick_chunk,
                 "configs per quick-pass child: the GPU starts on a row's first chunk while the "
                 "rest compiles")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--shard", shard_text,
                 "I/N: sweep only shard I of N of each row's configs (a hashed split, so every "
                 "shard gets the same mix; one shard per GPU: run N processes, each with "
                 "CUDA_VISIBLE_DEVICES set); "
                 "writes DIR/<row>.shard-I-of-N.tsv under --details");
  app.add_flag("--resume", resume,
               "carry the configs already finished in the --details directory (any shard's "
               "file) instead of sweeping them again, matched by the kernel they generate; a "
               "later call continues where the last stopped");
  app.add_flag("--quick-only", quick_only,
               "stop after the quick pass and its --details (shard runs: --finish validates)");
  app.add_flag("--finish", finish,
               "sweep nothing new: read every shard's --details, put the best through full "
               "validation and print the table of what was covered (implies --resume)");
  app.add_option("--gpu-reserve-s", reserve_s,
                 "with --time-budget-s: seconds before its end at which compiling stops, kept "
                 "for the quick passes still queued (default: 30 capped, 45 exhaustive, at "
                 "most a quarter of the budget)");
  app.add_flag("--compile-only", compile_only,
               "stop before the GPU: enumerate, compile and print the counts");
  app.add_option("--top", top, "quick-pass winners put through full validation")
      ->check(CLI::Range(1, 50));
  app.add_option("--jobs", jobs, "compile threads (0: cores - 1, or cores - 2 with the GPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--reps", reps, "timed reps per config in the quick pass")
      ->check(CLI::Range(1, 1000));
  app.add_option("--prune", prune,
                 "quick pass: stop timing a config after one rep when it is this many times "
                 "slower than the best so far")
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option("--torch-times", torch_path, "JSON written by torch_compile_times.py");
  app.add_option("--out", out_path,
                 "also write the markdown table to this file (rewritten after every row)");
  app.add_option("--details", details_dir,
                 "write every config's results as DIR/<row>.tsv (DIR/<row>.shard-I-of-N.tsv "
                 "with --shard), after every quick-pass chunk");
  app.add_option("--sources", sources_dir,
                 "write each swept kernel's generated source and launch plan as "
                 "DIR/<row>.<n>.cu and .plan.json (first line: its config), to read, profile "
                 "or compile it by hand");
  app.add_option("--priors", priors_path,
                 "write every valid config's cost-model prior (row, config, µs as TSV) to this "
                 "file and exit: to rank the prior against --details' measured times");
  app.add_option("--emit-rows", emit_rows,
                 "write the anchor rows (ops, args, shapes) as JSON for torch_compile_times.py "
                 "and exit");
  app.add_option("--cache", cache_dir, "compile cache directory (default: a temp dir, removed)");
  app.add_option("--work-dir", work_dir, "scratch for the quick pass (default: a temp dir)");
  app.add_option("--seed", seed, "seed of the random inputs and of the sweep order");
  app.add_flag("--shape-generic", shape_generic,
               "full validation also on the evaluator's held-out shape");
  CLI11_PARSE(app, argc, argv);
  const std::map<std::string, std::string> where = synth::SplitParams(where_text);
  for (const auto& [name, value] : where) {
    if (value.empty()) {
      std::cerr << "--where '" << where_text << "': '" << name
                << "' is not name=value (for example split_mode=sync)\n";
      return 2;
    }
  }
  bench::Shard shard;
  if (!shard_text.empty()) {
    absl::StatusOr<bench::Shard> parsed = bench::ParseShard(shard_text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", std::string(parsed.status().message()).c_str());
      return 2;
    }
    shard = *parsed;
  }
  if ((resume || finish) && details_dir.empty()) {
    std::fprintf(stderr,
                 "--resume and --finish read the results of earlier runs from --details DIR; "
                 "pass the directory those runs wrote\n");
    return 2;
  }
  if (finish && shard.count > 1) {
    std::fprintf(stderr, "--finish merges every shard; run it without --shard\n");
    return 2;
  }
  if (resume || finish) resume_dir = details_dir;
  // Files written as rows are prepared: fail now, naming the path, rather than write nothing.
  if (!priors_path.empty()) {
    if (!std::ofstream(priors_path, std::ios::trunc)) {
      std::fprintf(stderr, "--priors %s: cannot write that file\n", priors_path.c_str());
      return 2;
    }
    compile_only = true;  // priors need no GPU
  }
  if (!sources_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(sources_dir, ec);
    if (ec || !std::ofstream(sources_dir + "/.kforge-write-check")) {
      std::fprintf(stderr, "--sources %s: cannot write into that directory%s%s\n",
                   sources_dir.c_str(), ec ? ": " : "", ec ? ec.message().c_str() : "");
      return 2;
    }
    std::filesystem::remove(sources_dir + "/.kforge-write-check", ec);
  }

  absl::StatusOr<std::vector<AnchorRow>> anchors = bench::SelectRows(rows_filter, kTargetIdPrefix);
  if (!anchors.ok()) {
    std::fprintf(stderr, "%s\n", std::string(anchors.status().message()).c_str());
    return 2;
  }
  if (!emit_rows.empty()) {
    absl::Status s = WriteFile(emit_rows, RowsJson(*anchors).dump(2) + "\n");
    if (!s.ok()) {
      std::fprintf(stderr, "--emit-rows: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    return 0;
  }
  absl::StatusOr<std::map<std::string, TorchTimes>> torch = bench::ReadTorchTimes(torch_path);
  if (!torch.ok()) {
    std::fprintf(stderr, "%s\n", std::string(torch.status().message()).c_str());
    return 2;
  }

  const std::string tag = absl::StrCat(::getpid());
  const bool temp_cache = cache_dir.empty();
  // An exhaustive sweep compiles every config once: a temp cache would only write ~20 GB of
  // cubins and PTX to disk. A given --cache is used.
  const bool use_cache = !temp_cache || max_configs > 0;
  if (temp_cache) cache_dir = absl::StrCat("/tmp/kforge-synth-sweep-cache-", tag);
  const bool temp_work = work_dir.empty();
  if (temp_work) work_dir = absl::StrCat("/tmp/kforge-synth-sweep-work-", tag);
  // Temp scratch and a temp cache go on every way out (a given --work-dir or --cache stays).
  struct Cleanup {
    std::string work, cache;
    ~Cleanup() {
      std::error_code ec;
      if (!work.empty()) std::filesystem::remove_all(work, ec);
      if (!cache.empty()) std::filesystem::remove_all(cache, ec);
    }
  } cleanup{temp_work ? work_dir : "", temp_cache ? cache_dir : ""};
  int open_failed = 0;
  std::unique_ptr<bench::BenchCompiler> compile =
      bench::OpenBenchCompiler(cache_dir, use_cache, &open_failed);
  if (!compile) return open_failed;

  Clock::time_point start = Clock::now();
  // The GPU first (its child measures bandwidth and SMs), so the families bind for it.
  v1::GpuInfo gpu;
  std::unique_ptr<Evaluator> evaluator;
  synth::GpuModel model;  // H200 defaults for --compile-only
  if (!compile_only) {
    absl::StatusOr<std::unique_ptr<Evaluator>> created = Evaluator::Create({});
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", std::string(created.status().message()).c_str());
      return 3;
    }
    evaluator = std::move(*created);
    absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator->GetGpuInfo();
    if (!gpus.ok() || gpus->empty()) {
      std::fprintf(stderr, "no GPU to sweep on (%s); --compile-only runs without one\n",
                   gpus.ok() ? "none reported" : std::string(gpus.status().message()).c_str());
      return 3;
    }
    gpu = (*gpus)[0];
    model = synth::GpuModel::FromInfo(gpu);
  }
  v1::CompileOptions compile_options;
  compile_options.set_arch(compile_only ? "sm_90" : gpu.arch());
  // Leave a core to the evaluator and quick-pass children while the GPU work overlaps compiles.
  if (jobs == 0) {
    jobs =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - (compile_only ? 1 : 2));
  }

  std::vector<std::unique_ptr<Row>> rows;
  for (AnchorRow& a : *anchors) {
    rows.push_back(std::make_unique<Row>());
    rows.back()->anchor = std::move(a);
  }
  TableContext ctx;
  ctx.compile_only = compile_only;
  ctx.torch = &*torch;
  ctx.gpu = gpu;
  ctx.max_configs = max_configs;
  ctx.budget_s = budget_s;
  ctx.quick_only = quick_only;
  if (finish || resume || shard.count > 1) {
    ctx.coverage = absl::StrCat(
        finish ? "Merged from the --details of every shard and call (--finish): "
               : (resume ? "Resumed (--resume): configs finished by earlier calls are counted "
                           "with their earlier quick results; "
                         : ""),
        shard.count > 1 ? absl::StrCat("this run swept shard ", shard_text, " (a hashed 1/",
                                       shard.count, " of each row's configs). ")
                        : "",
        "\"configs swept\" of \"valid\" is the coverage: equal means exhaustive.");
  }
  auto publish = [&](bool final) {
    ctx.final = final;
    ctx.total_s = Seconds(start);
    const std::string table = Table(rows, ctx);
    if (final) {
      std::printf("%s", table.c_str());
      std::fflush(stdout);
    }
    if (!out_path.empty()) {
      absl::Status s = WriteFile(out_path, table);
      if (!s.ok()) std::fprintf(stderr, "--out: %s\n", std::string(s.message()).c_str());
    }
  };
  {
    CompilePool pool(compile->compiler.get(), compile_options, jobs);
    // A capped sweep: row r stops compiling at its cumulative share of the budget, less a
    // reserve for the GPU work of the last row. An exhaustive one (no --max-configs): every
    // row compiles until one deadline, the budget less --gpu-reserve-s for the quick passes
    // still to run; what is left is swept by the next call (--resume).
    const double reserve =
        reserve_s >= 0 ? reserve_s : std::min(max_configs > 0 ? 30.0 : 45.0, budget_s / 4);
    PrepareOptions prepare;
    prepare.max_configs = max_configs;
    prepare.seed = static_cast<uint64_t>(seed);
    prepare.shard = shard;
    prepare.batch_size = batch;
    prepare.resume_dir = resume_dir;
    prepare.finish_only = finish;
    if (!configs_text.empty()) prepare.configs = absl::StrSplit(configs_text, '|');
    prepare.where = where;
    prepare.sources_dir = sources_dir;
    prepare.priors_path = priors_path;
    for (size_t i = 0; i < rows.size(); ++i) {
      Row& r = *rows[i];
      if (budget_s > 0) {
        const double share =
            max_configs > 0 ? static_cast<double>(i + 1) / static_cast<double>(rows.size()) : 1.0;
        r.compile_deadline =
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(std::max(0.0, budget_s - reserve) * share));
      }
      // Enumeration and generation are quick next to compiling: queue each row as it is ready.
      PrepareRow(r, model, prepare);
      const std::string space =
          r.enumerated ? absl::StrFormat("%zu valid configs (enumerated in %.1f s, %.0f configs/s)",
                                         r.enumeration.valid.size(), r.enumerate_s,
                                         r.enumeration.product / std::max(r.enumerate_s, 1e-9))
                       : "the space not enumerated (--configs)";
      std::fprintf(stderr,
                   "%s: %s, %s, %zu to sweep%s, %zu distinct kernels, %zu carried from --details, "
                   "%zu sources to compile in %zu batches%s%s\n",
                   r.anchor.id.c_str(), r.family.c_str(), space.c_str(), r.configs.size(),
                   shard.count > 1 ? absl::StrCat(" in shard ", shard_text).c_str() : "",
                   r.kernels.size(), r.carried_configs, SourcesToCompile(r), r.batches.size(),
                   r.error.empty() ? "" : ": ", r.error.c_str());
      if (r.stale_configs > 0) {
        std::fprintf(stderr,
                     "  %s: %zu configs of --details swept again: they generate another kernel "
                     "now (or their line has no kernel_sha256)\n",
                     r.anchor.id.c_str(), r.stale_configs);
      }
      std::vector<std::pair<int64_t, std::string>> reasons;
      for (const auto& [why, n] : r.enumeration.refusals) reasons.emplace_back(-n, why);
      std::sort(reasons.begin(), reasons.end());
      for (size_t j = 0; j < reasons.size() && j < 3; ++j) {
        std::fprintf(stderr, "  %s: %lld canonical configs refused: %s\n", r.anchor.id.c_str(),
                     static_cast<long long>(-reasons[j].first), reasons[j].second.c_str());
      }
      if (r.error.empty()) pool.Add(&r);
    }
    if (!priors_path.empty()) {
      std::fprintf(stderr, "wrote the priors of every valid config to %s\n", priors_path.c_str());
      return 0;
    }

    std::unique_ptr<EvaluationPipeline> pipeline;
    if (!compile_only) {
      pipeline = std::make_unique<EvaluationPipeline>(compile->compiler.get(), evaluator.get(), nullptr);
    }
    QuickOptions quick;
    quick.child = (std::filesystem::path(ExeDir()) / "kforge-synth-sweep-quick").string();
    quick.reps = reps;
    quick.prune_factor = prune;
    for (auto& r : rows) {
      if (!r->error.empty()) {
        r->done = true;
        continue;
      }
      auto compile_report = [&] {
        r->compiled_ok = CountCompiled(*r, true);
        for (const Kernel& k : r->kernels) {
          if (k.compiled.status() != v1::COMPILE_OK &&
              k.compiled.status() != v1::COMPILE_STATUS_UNSPECIFIED && !k.carried) {
            std::fprintf(stderr, "  %s: first compile failure (%s): %s\n", r->anchor.id.c_str(),
                         v1::CompileStatus_Name(k.compiled.status()).c_str(),
                         k.compiled.log().substr(0, 600).c_str());
            break;
          }
        }
        std::fprintf(
            stderr,
            "  %s: %lld of %zu configs compiled (%zu carried; %d batches member by member) in "
            "%.1f s (%.1f configs/s)\n",
            r->anchor.id.c_str(), static_cast<long long>(r->compiled_ok), r->configs.size(),
            r->carried_configs, r->batch_fallbacks.load(), r->compile_s,
            (r->compiled_ok - static_cast<int64_t>(r->carried_configs)) /
                std::max(r->compile_s, 1e-9));
      };
      if (compile_only) {
        pool.Wait(*r, r->batches.size());
        compile_report();
        r->done = true;
        continue;
      }
      absl::StatusOr<std::string> inputs =
          bench::MakeInputs(r->anchor, static_cast<uint64_t>(seed));
      if (!inputs.ok()) {
        pool.Wait(*r, r->batches.size());
        r->error = absl::StrCat("inputs: ", inputs.status().message());
        r->done = true;
        continue;
      }
      // The quick results first, so a run cut short during full validation keeps them.
      auto write_details = [&] {
        if (details_dir.empty()) return;
        absl::Status s = WriteDetails(*r, details_dir, shard);
        if (!s.ok()) std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      };
      // The quick pass in chunks of --quick-chunk configs as their batches compile: the GPU
      // works while the row still compiles, and a run stopped at its deadline loses at most
      // one chunk. Each chunk's results go to --details at once.
      InitQuick(*r);
      const bool exhaustive_budget = max_configs == 0 && budget_s > 0 && !finish;
      const std::filesystem::path row_dir = std::filesystem::path(work_dir) / r->anchor.id;
      const size_t per_chunk =
          std::max<size_t>(1, static_cast<size_t>(quick_chunk) / static_cast<size_t>(batch));
      absl::Status q = absl::OkStatus();
      for (size_t from = 0; from < r->batches.size() && q.ok(); from += per_chunk) {
        // An exhaustive sweep stops timing at its budget too: a queue of compiled chunks
        // longer than --gpu-reserve-s would otherwise run past the caller's hard limit and
        // lose every result. The untimed configs stay out of --details, for --resume.
        if (exhaustive_budget && Seconds(start) > budget_s) {
          std::fprintf(stderr, "  %s: the budget has passed; the configs not yet timed are left "
                       "to a --resume call\n", r->anchor.id.c_str());
          break;
        }
        const size_t upto = std::min(from + per_chunk, r->batches.size());
        pool.Wait(*r, upto);
        std::vector<size_t> chunk;
        for (size_t b = from; b < upto; ++b) {
          for (size_t k : r->batches[b].kernels) chunk.push_back(k);
        }
        Clock::time_point t = Clock::now();
        q = QuickPass(*r, chunk, *inputs, row_dir, quick);
        r->quick_s += Seconds(t);
        for (size_t b = from; b < upto; ++b) {
          std::string().swap(r->batches[b].cubin);
          for (size_t k : r->batches[b].kernels) r->kernels[k].compiled.clear_cubin();
        }
        if (q.ok()) write_details();
      }
      pool.Wait(*r, r->batches.size());
      compile_report();
      std::error_code ec;
      std::filesystem::remove_all(row_dir, ec);
      if (!q.ok()) {
        r->error = absl::StrCat("quick pass: ", q.message());
        std::fprintf(stderr, "  %s: %s\n", r->anchor.id.c_str(), r->error.c_str());
        r->done = true;
        publish(false);
        continue;
      }
      if (r->batches.empty()) write_details();
      if (!quick_only) {
        Clock::time_point t = Clock::now();
        // Past the budget: one full validation instead of `top`.
        const bool late = !finish && budget_s > 0 && Seconds(start) > budget_s;
        FullValidation(*r, *pipeline, *inputs, gpu.arch(), late ? 1 : top, shape_generic);
        r->full_s = Seconds(t);
        write_details();
      }
      r->done = true;
      publish(false);
    }
  }
  publish(true);
  // The table shows every row's error; the exit status says there was one.
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const std::unique_ptr<Row>& r) {
    return !r->error.empty();
  });
  if (failed > 0) {
    std::fprintf(stderr, "%zd of %zu rows failed (their errors are in the table)\n",
                 static_cast<ssize_t>(failed), rows.size());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
