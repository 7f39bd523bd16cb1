#!/usr/bin/env python3
"""The per-target benchmark path on a real optimize run of the tiny model (captured on the CPU):
`kforge report` (summary, --json, --torch-rows with and without --torch-inputs),
tools/bench/torch_compile_times.py on those rows, tools/bench/target_table.py and
tools/bench/coverage_table.py on the run.

  target_table_test.py --kforge BIN --repo SRC [--gpu]

Without --gpu (label integration): torch_compile_times.py --check builds every row on the meta
device, the captured inputs are the model's real tensors, the table shows "not timed" cells
with their reasons, and every bad input is one clear error. With --gpu (label gpu):
torch_compile_times.py times the rows on the GPU, every batch of reps is covered by the GPU
spin, and the table carries the torch times.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []


def expect(cond, what, detail=""):
    if not cond:
        FAILURES.append(f"{what}\n{detail}")
        print(f"FAIL: {what}\n{detail}", file=sys.stderr)


def run(cmd, cwd, code=0):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    expect(r.returncode == code, f"exit {r.returncode} (wanted {code}): {' '.join(cmd)}",
           r.stdout[-3000:] + r.stderr[-3000:])
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kforge", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--gpu", action="store_true")
    args = p.parse_args()
    py = sys.executable
    bench = os.path.join(args.repo, "tools", "bench")
    times_py, table_py = os.path.join(bench, "torch_compile_times.py"), os.path.join(bench, "target_table.py")

    with tempfile.TemporaryDirectory() as tmp:
        run([py, os.path.join(args.repo, "tests", "optimize", "make_tiny_model.py"),
             "model", "cpu"], tmp)
        out = os.path.join(tmp, "run")
        # Single ops (--no-fuse): three targets, one per op; a chain's row is checked below.
        run([args.kforge, "optimize", "model/model.pt", "--inputs", "model/inputs.pt", "--out",
             out, "--device", "cpu", "--top", "3", "--iterations", "4", "--seed", "7",
             "--no-fuse"], tmp, 3)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        ids = [t["target_id"] for t in report["targets"]]
        ops = {t["target_id"]: t["op"] for t in report["targets"]}
        expect(len(ids) == 3, "three targets searched", report)

        # kforge report: the summary, report.json, and a clear error on a non-run.
        r = run([args.kforge, "report", out], tmp)
        expect(r.stdout.startswith("kforge optimize: "), "report prints summary.txt", r.stdout)
        r = run([args.kforge, "report", out, "--json"], tmp)
        expect(json.loads(r.stdout)["status"] == "no_gpu", "report --json prints report.json")
        r = run([args.kforge, "report", os.path.join(tmp, "model")], tmp, 2)
        expect("is not a kforge optimize run (no run.json)" in r.stderr, "non-run error", r.stderr)

        # Rows on random inputs, then on the captured ones.
        r = run([args.kforge, "report", out, "--torch-rows", "random.json"], tmp)
        expect("wrote 3 torch rows (of 3 selected targets)" in r.stdout, "rows line", r.stdout)
        with open(os.path.join(tmp, "random.json")) as f:
            random_rows = json.load(f)
        expect([row["id"] for row in random_rows] == ids, "rows in the run's target order",
               json.dumps(random_rows)[:2000])
        expect(all("inputs_file" not in row for row in random_rows), "no inputs_file without "
               "--torch-inputs")
        for row in random_rows:
            expect(row["op"] == ops[row["id"]], f"row {row['id']} op {row['op']}")
        ln = [row for row in random_rows if row["op"] == "aten::layer_norm"]
        expect(len(ln) == 1 and [i["fill"] for i in ln[0]["inputs"]] == ["normal", "weight", "bias"],
               "layer_norm fills follow its arguments", json.dumps(ln))
        r = run([args.kforge, "report", out, "--torch-rows", "rows.json", "--torch-inputs",
                 "inputs"], tmp)
        with open(os.path.join(tmp, "rows.json")) as f:
            rows = json.load(f)
        for row in rows:
            expect(os.path.isfile(row.get("inputs_file", "")), f"row {row['id']} inputs_file", row)

        # The captured inputs are the model's real tensors: softmax's input is the model input.
        import torch
        x = torch.load(os.path.join(tmp, "model", "inputs.pt"))[0]
        sm = [row for row in rows if row["op"] == "aten::softmax"][0]
        captured = torch.load(sm["inputs_file"], weights_only=True)
        expect(torch.equal(captured[sm["input_names"][0]], x), "softmax's captured input is x")

        r = run([py, times_py, "--rows-json", "rows.json", "--check"], tmp)
        expect(r.stdout.count("(captured inputs)") == 3, "--check runs every captured row",
               r.stdout)
        expect("[(256, 512)]" in r.stdout, "--check reports the output shapes", r.stdout)
        r = run([py, times_py, "--rows-json", "random.json", "--check"], tmp)
        expect(r.stdout.count("(random inputs)") == 3, "--check runs every random row", r.stdout)

        # --profile (for ncu): every function called once per row in a profiler range; on a
        # machine without a GPU, one clear error.
        gpu = torch.cuda.is_available()
        r = run([py, times_py, "--rows-json", "rows.json", "--profile", "--modes", "default"], tmp,
                0 if gpu else 1)
        if gpu:
            for tid in ids:
                expect(f"profiled {tid}/compiled/default" in r.stdout
                       and f"profiled {tid}/eager" in r.stdout, f"{tid[:12]} profiled", r.stdout)
        else:
            expect("--profile runs the rows on a CUDA GPU and this machine has none" in r.stderr,
                   "--profile without a GPU", r.stderr)

        # A chain's row (common/torch_rows.h): each op in turn, on the inputs and the outputs of
        # the ops before it.
        chain_row = {"id": "chain", "label": "", "op": "aten::mul -> aten::add -> aten::softmax",
                     "inputs": [{"sizes": [2, 4, 8], "dtype": "FLOAT32", "fill": "normal"},
                                {"sizes": [1, 1, 8], "dtype": "FLOAT32", "fill": "normal"}],
                     "chain": [{"op": "aten::mul", "overload": "Tensor",
                                "args": [{"name": "self", "input": 0},
                                         {"name": "other", "input": 1}]},
                               {"op": "aten::add", "overload": "Tensor",
                                "args": [{"name": "self", "node": 0},
                                         {"name": "other", "input": 1}]},
                               {"op": "aten::softmax", "overload": "int",
                                "args": [{"name": "self", "node": 1}, {"name": "dim", "value": -1},
                                         {"name": "dtype", "value": None}]}],
                     "min_bytes": 0}
        with open(os.path.join(tmp, "chain.json"), "w") as f:
            json.dump([chain_row], f)
        r = run([py, times_py, "--rows-json", "chain.json", "--check"], tmp)
        expect("chain: aten::mul -> aten::add -> aten::softmax -> [(2, 4, 8)]" in r.stdout,
               "a chain row runs its ops in turn", r.stdout + r.stderr)
        del chain_row["chain"][2]["overload"]
        with open(os.path.join(tmp, "chain.json"), "w") as f:
            json.dump([chain_row], f)
        r = run([py, times_py, "--rows-json", "chain.json", "--check"], tmp, 1)
        expect("row chain chain node 2 lacks 'overload'" in r.stderr, "chain node error", r.stderr)

        # Bad rows: a missing inputs file, a wrong captured shape, an argument not in the schema.
        bad = json.loads(json.dumps(rows))
        bad[0]["inputs_file"] = os.path.join(tmp, "gone.pt")
        with open(os.path.join(tmp, "bad1.json"), "w") as f:
            json.dump(bad, f)
        r = run([py, times_py, "--rows-json", "bad1.json", "--check"], tmp, 1)
        expect("gone.pt, which does not exist" in r.stderr, "missing inputs_file error", r.stderr)
        bad = json.loads(json.dumps(rows))
        bad[0]["inputs"][0]["sizes"] = [7, 7]
        with open(os.path.join(tmp, "bad2.json"), "w") as f:
            json.dump(bad, f)
        r = run([py, times_py, "--rows-json", "bad2.json", "--check"], tmp, 1)
        expect("the row says [7, 7]" in r.stderr, "captured shape mismatch error", r.stderr)
        bad = json.loads(json.dumps(random_rows))
        bad[0]["args"].append({"name": "no_such_arg", "value": 1})
        with open(os.path.join(tmp, "bad3.json"), "w") as f:
            json.dump(bad, f)
        r = run([py, times_py, "--rows-json", "bad3.json", "--check"], tmp, 1)
        expect("no_such_arg are not in the schema" in r.stderr, "unknown argument error", r.stderr)

        # The table of a run that stopped before timing: every timed cell says why it is empty.
        r = run([py, table_py, out, "--out", "table.md"], tmp)
        with open(os.path.join(tmp, "table.md")) as f:
            table = f.read()
        for tid in ids:
            line = [ln for ln in table.splitlines() if f"`{tid[:12]}`" in ln]
            expect(len(line) == 1, f"one table line for {tid[:12]}", table)
            expect(line and line[0].count("not timed[^m1-") == 5, "5 not-timed cells", line)
        expect("the run's status is 'no_gpu'" in table, "not-timed note", table)
        expect("no --torch-times given and RUN/torch-times.json is absent" in table,
               "torch-times note", table)
        expect("End to end: not checked[^m1-" in table and "no RUN/check.json" in table,
               "end-to-end note", table)

        # The coverage table of the same run: its three targets and their compiles in one row.
        coverage_py = os.path.join(bench, "coverage_table.py")
        r = run([py, coverage_py, out, os.path.join(tmp, "no-such-run")], tmp)
        rows = [ln for ln in r.stdout.splitlines() if ln.startswith("|")][2:]  # after the header
        expect(len(rows) == 2, "one coverage row per run directory", r.stdout)
        if len(rows) == 2:
            cells = [c.strip() for c in rows[0].strip("|").split("|")]
            compiled = sum(len(t.get("compiled_candidates", [])) for t in report["targets"])
            share = 100 * sum(t["share"] for t in report["targets"])
            expect(cells[1:4] == ["cpu", "no_gpu", f"3, {share:.1f}%"],
                   "device, status, targets and their share", cells)
            expect(all(ops[tid].replace("aten::", "") in cells[4] for tid in ids),
                   "every searched op listed", cells)
            expect(cells[5] == f"{compiled} of {compiled}", "every candidate compiled", cells)
            expect("no report:" in rows[1], "a directory without a report says so", rows[1])
        # A times file that lacks the targets: the cells say so.
        with open(os.path.join(tmp, "empty-times.json"), "w") as f:
            json.dump({"rows": {}}, f)
        r = run([py, table_py, out, "--torch-times", "empty-times.json"], tmp)
        expect("no torch-times row for this target" in r.stdout, "missing-row note", r.stdout)

        # "vs torch.compile" of a timed run (report.json as a GPU run writes it, times as the
        # torch script writes them): side by side when the script timed kforge's kernel too,
        # else against the worker's time, and the note says which.
        timed_run = os.path.join(tmp, "timed-run")
        os.makedirs(timed_run)
        timed = json.loads(json.dumps(report))
        timed["status"] = "complete"
        for t in timed["targets"]:
            t.update(eager_s=100e-6, best_s=50e-6, floor_s=25e-6)
        with open(os.path.join(timed_run, "report.json"), "w") as f:
            json.dump(timed, f)
        side = {"rows": {ids[0]: {"eager_s": 99e-6, "compiled_s": {"default": 60e-6},
                                  "kforge_s": {"default": 40e-6}, "note": ""},
                         ids[1]: {"eager_s": 99e-6, "compiled_s": {"default": 60e-6},
                                  "kforge_s": {}, "note": ""}}}
        with open(os.path.join(tmp, "side-times.json"), "w") as f:
            json.dump(side, f)
        r = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        line = {tid: [ln for ln in r.stdout.splitlines() if f"`{tid[:12]}`" in ln][0]
                for tid in ids[:2]}
        expect("| 40.0 |" in line[ids[0]] and "| 1.50x[^m1-" in line[ids[0]],
               "side by side: 60 / 40", line[ids[0]])
        expect("| 1.20x[^m1-" in line[ids[1]], "worker time: 60 / 50", line[ids[1]])
        expect("timed in one interleaved loop" in r.stdout and "two processes" in r.stdout,
               "notes say which comparison each ratio is", r.stdout)
        # A launch-bound row (under 20 µs) with CUDA-graph replay times: "vs torch.compile" is
        # their ratio (2.0 / 1.6), the single launches' (5 / 6) in its note.
        graph_side = json.loads(json.dumps(side))
        graph_side["rows"][ids[2]] = {"eager_s": 9e-6, "compiled_s": {"default": 5e-6},
                                      "kforge_s": {"default": 6e-6}, "graph_eager_s": 3e-6,
                                      "graph_compiled_s": {"default": 2.0e-6},
                                      "graph_kforge_s": {"default": 1.6e-6}, "note": ""}
        with open(os.path.join(tmp, "graph-times.json"), "w") as f:
            json.dump(graph_side, f)
        graph_run = run([py, table_py, timed_run, "--torch-times", "graph-times.json"], tmp)
        line = [ln for ln in graph_run.stdout.splitlines() if f"`{ids[2][:12]}`" in ln][0]
        expect("| 5.0 (default); graph 2.00 (default)" in line and "| 6.0; graph 1.60 |" in line
               and "| 1.25x[^m1-" in line, "launch-bound row: graph replay ratio", line)
        expect("CUDA-graph replays of 20 calls" in graph_run.stdout
               and "one launch each: 0.83x" in graph_run.stdout,
               "the note names the method and the single-launch ratio", graph_run.stdout)
        # The end-to-end table of a checked run, and its CUDA-graph replays when check-optimized
        # measured them (kforge 2.5 ms against TorchScript's 3.0 and torch.compile's 2.0).
        check = {"device": "cuda", "runs": 5, "outputs_match": True, "passed": True,
                 "latency": {"eager_ms": 8.0, "torch_compile_ms": 4.0, "torchscript_ms": 6.0,
                             "kforge_ms": 5.0, "torch_compile_graph_ms": 2.0,
                             "torchscript_graph_ms": 3.0, "kforge_graph_ms": 2.5}}
        with open(os.path.join(timed_run, "check.json"), "w") as f:
            json.dump(check, f)
        r_check = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        expect("| 8.000 | 4.000 | 6.000 | 5.000 | 1.60x | 0.80x | match | none | PASS |"
               in r_check.stdout, "end-to-end row", r_check.stdout)
        expect("| 2.000 | 3.000 | 2.500 | 1.20x | 0.80x |" in r_check.stdout,
               "CUDA-graph end-to-end row", r_check.stdout)
        del check["latency"]["kforge_graph_ms"], check["latency"]["torchscript_graph_ms"]
        del check["latency"]["torch_compile_graph_ms"]
        with open(os.path.join(timed_run, "check.json"), "w") as f:
            json.dump(check, f)
        r_check = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        expect("captured once as a CUDA graph" not in r_check.stdout,
               "no graph table without graph times", r_check.stdout)
        os.remove(os.path.join(timed_run, "check.json"))

        # The summary counts both (1.50x and 1.20x: 2 of 2, one side by side); a target whose
        # signature names a tensor over 64 MB is held to 70% of the floor (50% here).
        expect("At least as fast as torch.compile (its faster mode): **2 of 2** targets "
               "(100%; the target is 80%), 1 of them compared side by side" in r.stdout,
               "summary of the torch.compile comparisons", r.stdout)
        timed["targets"][0]["signature"] = "f32[1,128,512,512] f32[128]"
        with open(os.path.join(timed_run, "report.json"), "w") as f:
            json.dump(timed, f)
        side["rows"][ids[1]]["compiled_s"]["default"] = 40e-6
        with open(os.path.join(tmp, "side-times.json"), "w") as f:
            json.dump(side, f)
        r = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        expect("**1 of 2** targets (50%" in r.stdout and "0.80x" in r.stdout,
               "a target behind torch.compile is counted and listed", r.stdout)
        expect("over 64 MB at 70% of the floor or more: **0 of 1**" in r.stdout
               and "(134 MB): 50%" in r.stdout, "the floor target of a large tensor", r.stdout)
        expect("Within 1%" not in r.stdout, "no tie line without a ratio within 1%", r.stdout)
        # Behind by 0.4% (49.8 / 50): still behind in the count, and named a tie.
        side["rows"][ids[1]]["compiled_s"]["default"] = 49.8e-6
        with open(os.path.join(tmp, "side-times.json"), "w") as f:
            json.dump(side, f)
        r = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        expect("**1 of 2** targets (50%" in r.stdout and "behind (within 1%): timed-run "
               f"`{ids[1][:12]}`" in r.stdout and "0.996x" in r.stdout
               and "1 of them, 0 counted as at least as fast and 1 as behind" in r.stdout,
               "a ratio within 1% is counted as measured and named a tie", r.stdout)
        # A winner that kforge export left out (slower than eager here): the model runs
        # PyTorch's op there, so the table says so and the summary does not count it.
        os.makedirs(os.path.join(timed_run, "export"))
        with open(os.path.join(timed_run, "export", "manifest.json"), "w") as f:
            json.dump({"kernels": [{"id": "k0", "target_id": ids[0]}]}, f)
        timed["targets"][1]["best_s"] = 125e-6
        with open(os.path.join(timed_run, "report.json"), "w") as f:
            json.dump(timed, f)
        r = run([py, table_py, timed_run, "--torch-times", "side-times.json"], tmp)
        line = [ln for ln in r.stdout.splitlines() if f"`{ids[1][:12]}`" in ln][0]
        expect("| not exported[^m1-" in line and "not faster than eager (0.80x)" in r.stdout,
               "a target left out of the bundle says so", line + "\n" + r.stdout)
        expect("**1 of 1** targets (100%" in r.stdout and "left to PyTorch (no kernel exported): "
               f"timed-run `{ids[1][:12]}`" in r.stdout, "the summary leaves it out", r.stdout)

        # Missing and malformed inputs of the table tool: exit 2 naming the file.
        r = run([py, table_py, out, "--torch-times", "nope.json"], tmp, 2)
        expect("--torch-times nope.json does not exist" in r.stderr, "missing times", r.stderr)
        with open(os.path.join(tmp, "not-times.json"), "w") as f:
            json.dump([1, 2], f)
        r = run([py, table_py, out, "--torch-times", "not-times.json"], tmp, 2)
        expect("is not torch_compile_times.py output" in r.stderr, "malformed times", r.stderr)
        r = run([py, table_py, os.path.join(tmp, "missing-run")], tmp, 2)
        expect("is not a directory" in r.stderr, "missing run", r.stderr)
        r = run([py, table_py, os.path.join(tmp, "model")], tmp, 2)
        expect("report" in r.stderr and "report.json does not exist" in r.stderr,
               "run without report.json", r.stderr)

        if args.gpu:
            r = run([py, times_py, "--rows-json", "rows.json", "--out",
                     os.path.join(out, "torch-times.json"), "--modes", "default"], tmp)
            print(r.stdout)
            with open(os.path.join(out, "torch-times.json")) as f:
                times = json.load(f)
            for tid in ids:
                rec = times["rows"].get(tid, {})
                expect(rec.get("eager_s", 0) > 0 and rec.get("compiled_s", {}).get("default", 0) > 0,
                       f"{tid[:12]} timed", rec)
                expect(rec.get("uncovered_batches") == 0, f"{tid[:12]}: the spin covered every "
                       "batch", rec)
                expect(rec.get("inputs") == "captured", f"{tid[:12]} on captured inputs", rec)
            r = run([py, table_py, out], tmp)
            print(r.stdout)
            expect(r.stdout.count("(default)") >= 3, "torch.compile cells filled", r.stdout)

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("target table path: all checks passed")


if __name__ == "__main__":
    main()
