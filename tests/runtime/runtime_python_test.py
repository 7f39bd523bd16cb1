#!/usr/bin/env python3
"""libkforge_runtime.so in Python, plain PyTorch, on the CPU (ctest: runtime_python_test).

Uses the bundle of the runtime_bundle fixture (tests/runtime/make_fixture.sh). Checks that the
two documented lines load and run the exported model, that a CPU call falls back through the
original operator and is counted, KFORGE_DISABLE, KFORGE_BUNDLE_DIR and load_bundle for a
moved bundle, refusal of a changed file (named), and tools/check-optimized on the CPU.

    runtime_python_test.py --lib LIB --fixture DIR --kforge KFORGE --repo REPO
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

from runtime_lib import find_library

ARGS = None


def python_child(code, env=None):
    """Runs `code` in a fresh interpreter (the runtime's state is per process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300)


def manifest(bundle):
    with open(os.path.join(bundle, "manifest.json")) as f:
        return json.load(f)


class RuntimeInPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.torch = torch
        cls.lib = find_library(ARGS.lib)
        cls.bundle = os.path.join(ARGS.fixture, "bundle")
        cls.original_path = os.path.join(ARGS.fixture, "model", "model.pt")
        cls.kernel_id = manifest(cls.bundle)["kernels"][0]["id"]
        torch.ops.load_library(cls.lib)

    def test_two_lines_load_and_run_it_on_cpu_through_the_fallback(self):
        torch = self.torch
        model = torch.jit.load(os.path.join(self.bundle, "model.pt"))
        original = torch.jit.load(self.original_path)
        torch.ops.kforge.reset_counts()
        x = torch.randn(64, 512)
        with torch.inference_mode():
            got = model(x)
            want = original(x)
        self.assertTrue(torch.equal(got, want))
        counts = torch.ops.kforge.fallback_counts()
        self.assertEqual(counts.get("cpu_tensor"), 1, counts)
        self.assertEqual(counts.get(f"{self.kernel_id}:cpu_tensor"), 1, counts)
        self.assertEqual(torch.ops.kforge.launch_counts(), {})
        torch.ops.kforge.reset_counts()
        self.assertEqual(torch.ops.kforge.fallback_counts(), {})
        self.assertFalse(torch.ops.kforge.disabled())
        self.assertIn("kforge::run", str(model.graph))
        self.assertIn("prim::If", str(model.graph))

    def test_grad_mode_on_cpu_still_reports_the_cpu(self):
        torch = self.torch
        model = torch.jit.load(os.path.join(self.bundle, "model.pt"))
        torch.ops.kforge.reset_counts()
        x = torch.randn(64, 512, requires_grad=True)
        y = model(x)
        y.sum().backward()  # the fallback keeps autograd working
        self.assertIsNotNone(x.grad)
        self.assertEqual(torch.ops.kforge.fallback_counts().get("cpu_tensor"), 1)

    def test_load_bundle_refuses_a_changed_file_naming_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "bundle")
            shutil.copytree(self.bundle, copy)
            cubin = manifest(copy)["kernels"][0]["binaries"][0]["cubin"]["path"]
            with open(os.path.join(copy, cubin), "ab") as f:
                f.write(b"patched")
            with self.assertRaises(RuntimeError) as caught:
                self.torch.ops.kforge.load_bundle(copy)
            self.assertIn(f"checksum mismatch for {cubin}", str(caught.exception))

    def test_kforge_disable_switches_every_kernel_off(self):
        r = python_child(
            "import torch, sys\n"
            f"torch.ops.load_library({self.lib!r})\n"
            f"m = torch.jit.load({os.path.join(self.bundle, 'model.pt')!r})\n"
            "with torch.inference_mode(): m(torch.randn(64, 512))\n"
            "print(torch.ops.kforge.disabled(), dict(torch.ops.kforge.fallback_counts()))\n",
            env={"KFORGE_DISABLE": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("True", r.stdout)
        self.assertIn("'disabled': 1", r.stdout)
        self.assertIn(f"'{self.kernel_id}:disabled': 1", r.stdout)

    def test_a_moved_bundle_is_found_through_the_env_or_load_bundle(self):
        with tempfile.TemporaryDirectory() as tmp:
            first = os.path.join(tmp, "first")
            r = subprocess.run([ARGS.kforge, "export", os.path.join(ARGS.fixture, "run"),
                                "--out", first], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            moved = os.path.join(tmp, "moved")
            os.rename(first, moved)
            run_it = (
                "import torch, os\n"
                f"torch.ops.load_library({self.lib!r})\n"
                "{load}\n"
                f"m = torch.jit.load({os.path.join(moved, 'model.pt')!r})\n"
                "with torch.inference_mode(): m(torch.randn(64, 512))\n"
                "print('ran', dict(torch.ops.kforge.fallback_counts()))\n")
            lost = python_child(run_it.format(load=""))
            self.assertNotEqual(lost.returncode, 0)
            self.assertIn("the model needs kernel bundle", lost.stderr)
            self.assertIn("KFORGE_BUNDLE_DIR", lost.stderr)
            by_env = python_child(run_it.format(load=""), env={"KFORGE_BUNDLE_DIR": moved})
            self.assertEqual(by_env.returncode, 0, by_env.stderr)
            self.assertIn("'cpu_tensor': 1", by_env.stdout)
            by_call = python_child(run_it.format(load=f"torch.ops.kforge.load_bundle({moved!r})"))
            self.assertEqual(by_call.returncode, 0, by_call.stderr)
            # A changed manifest is another bundle: never taken for the model's.
            with open(os.path.join(moved, "manifest.json"), "a") as f:
                f.write(" ")
            changed = python_child(run_it.format(load=""), env={"KFORGE_BUNDLE_DIR": moved})
            self.assertNotEqual(changed.returncode, 0)
            self.assertIn("its manifest.json differs from the one exported with this model",
                          changed.stderr)

    @staticmethod
    def check_optimized():
        """tools/check-optimized as a module, for its comparisons."""
        import importlib.machinery
        import importlib.util
        path = os.path.join(ARGS.repo, "tools", "check-optimized")
        loader = importlib.machinery.SourceFileLoader("check_optimized", path)
        check = importlib.util.module_from_spec(importlib.util.spec_from_loader("check_optimized", loader))
        loader.exec_module(check)
        return check

    def test_check_optimized_times_the_forwards_side_by_side(self):
        check = self.check_optimized()
        order = []
        calls = {name: (lambda name=name: order.append(name)) for name in ("a", "b", "c")}
        medians = check.interleaved_median_ms(calls, 3, "cpu", None)
        # Each round calls every forward once, starting one further along.
        self.assertEqual(order, ["a", "b", "c", "b", "c", "a", "c", "a", "b"])
        self.assertEqual(sorted(medians), ["a", "b", "c"])
        self.assertTrue(all(ms >= 0 for ms in medians.values()))

    def test_check_optimized_names_a_forwards_first_synchronizing_call(self):
        # A stand-in for torch.cuda (this machine has no GPU): the sync debug mode is set to
        # error around one forward and set back; the error's synchronizing line and the
        # TorchScript code line it marks are what the note says.
        check = self.check_optimized()
        modes = []
        cuda = types.SimpleNamespace(synchronize=lambda: None,
                                     set_sync_debug_mode=lambda mode: modes.append(mode))
        fake_torch = types.SimpleNamespace(cuda=cuda)

        def forward(x):
            raise RuntimeError("The following operation failed in the TorchScript interpreter.\n"
                               "Traceback of TorchScript, serialized code:\n"
                               "  File \"code/__torch__/m.py\", line 9, in forward\n"
                               "    _1 = torch.item(_0)\n"
                               "         ~~~~~~~~~~ <--- HERE\n"
                               "RuntimeError: called a synchronizing CUDA operation")

        sync = check.first_sync(forward, (1,), fake_torch)
        self.assertEqual(sync, "RuntimeError: called a synchronizing CUDA "
                               "operation at `_1 = torch.item(_0)`")
        self.assertEqual(modes, ["error", "default"])

        def eager_forward(x):  # a Python error's message does not name its type
            raise RuntimeError("called a synchronizing CUDA operation")

        self.assertEqual(check.first_sync(eager_forward, (1,), fake_torch),
                         "RuntimeError: called a synchronizing CUDA operation")
        self.assertEqual(check.first_sync(lambda x: x, (1,), fake_torch), "")
        self.assertEqual(modes, ["error", "default"] * 3)

    def test_check_optimized_scales_the_tolerance_by_eagers_own_error(self):
        import torch
        check = self.check_optimized()
        args = argparse.Namespace(rtol=1e-4, atol=1e-5)
        ref = torch.ones(4, dtype=torch.float64)
        eager = torch.ones(4) + 1e-3          # 9.1 tolerance units off the float64 reference
        near = torch.ones(4) + 3e-3           # 27 units: within 4 x eager's error
        far = torch.ones(4) + 5e-2            # 455 units: beyond it
        ok, detail = check.compare(near, eager, False, args, torch, ref)
        self.assertTrue(ok, detail)
        ok, detail = check.compare(far, eager, False, args, torch, ref)
        self.assertFalse(ok, detail)
        self.assertIn("error vs float64", detail)
        # Without a reference: the plain tolerance against eager.
        ok, _ = check.compare(near, eager, False, args, torch, None)
        self.assertFalse(ok)

    def test_check_optimized_takes_a_greedy_token_the_original_ties_within_tolerance(self):
        import torch
        check = self.check_optimized()
        args = argparse.Namespace(rtol=None, atol=None)
        eager = torch.tensor([[[0.0, 4.0, 3.97, 1.0]]], dtype=torch.bfloat16)  # top two tied
        ok, detail = check.compare_tokens(eager[..., -1, :], eager[..., -1, :], args, torch)
        self.assertTrue(ok, detail)
        self.assertEqual(detail, "greedy next tokens identical")
        tied = torch.tensor([[[0.0, 3.97, 4.0, 1.0]]], dtype=torch.bfloat16)
        ok, detail = check.compare_tokens(tied[..., -1, :], eager[..., -1, :], args, torch)
        self.assertTrue(ok, detail)
        self.assertIn("a tie, greedy tokens differ: [2] vs [1]", detail)
        wrong = torch.tensor([[[0.0, 1.0, 2.0, 5.0]]], dtype=torch.bfloat16)  # eager rates 3 far below
        ok, detail = check.compare_tokens(wrong[..., -1, :], eager[..., -1, :], args, torch)
        self.assertFalse(ok, detail)
        self.assertTrue(detail.startswith("greedy tokens differ: [3] vs [1]"), detail)

    def test_check_optimized_on_the_cpu(self):
        script = os.path.join(ARGS.repo, "tools", "check-optimized")
        module = os.path.join(ARGS.repo, "tests", "runtime", "make_runtime_model.py") + ":make"
        r = subprocess.run([sys.executable, script, self.bundle, "--lib", self.lib,
                            "--device", "cpu", "--runs", "5", "--module", module, "--json"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        report = json.loads(r.stdout)
        self.assertTrue(report["outputs_match"], report)
        # With --module the outputs are judged against a float64 run of the module, as the
        # worker judges one op (eager's own error scales the allowance).
        for check in report["checks"]:
            self.assertIn("error vs float64", check["detail"], report)
        self.assertEqual(report["unexpected_fallbacks"], {}, report)
        self.assertEqual(report["fallbacks"].get("cpu_tensor", 0) > 0, True, report)
        self.assertGreater(report["latency"]["kforge_ms"], 0)
        # The table form.
        r = subprocess.run([sys.executable, script, self.bundle, "--lib", self.lib,
                            "--device", "cpu", "--runs", "3"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("outputs", r.stdout)
        self.assertIn("eager", r.stdout)

    def test_torch_times_name_the_bundles_kernel_and_see_its_cpu_fallback(self):
        # torch_compile_times.py --kforge-bundle: the fixture run's rows, the softmax row mapped
        # to the bundle's kernel; on the CPU the runtime falls back, and the counters say so.
        times = os.path.join(ARGS.repo, "tools", "bench", "torch_compile_times.py")
        with tempfile.TemporaryDirectory() as tmp:
            rows = os.path.join(tmp, "rows.json")
            r = subprocess.run([ARGS.kforge, "report", os.path.join(ARGS.fixture, "run"),
                                "--torch-rows", rows, "--torch-inputs",
                                os.path.join(tmp, "inputs")],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = subprocess.run([sys.executable, times, "--rows-json", rows, "--check",
                                "--kforge-bundle", self.bundle, "--kforge-lib", self.lib],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(self.bundle, "manifest.json")) as f:
                kernel_id = json.load(f)["kernels"][0]["id"]
            self.assertIn(f": kforge kernel {kernel_id} fell back (cpu_tensor x1) on the CPU",
                          r.stdout)
            self.assertEqual(r.stdout.count("kforge kernel"), 1, r.stdout)  # one row has it
            # The flags go together and name what is missing.
            r = subprocess.run([sys.executable, times, "--rows-json", rows, "--check",
                                "--kforge-bundle", self.bundle],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--kforge-bundle and --kforge-lib go together", r.stderr)
            r = subprocess.run([sys.executable, times, "--rows-json", rows, "--check",
                                "--kforge-bundle", tmp, "--kforge-lib", self.lib],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("has no manifest.json", r.stderr)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--kforge", required=True)
    parser.add_argument("--repo", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
