#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): Nsight Compute on chosen synthesizer
# configs of one anchor row, to see what bounds a kernel the bytes do not explain (DRAM and
# L2 throughput, achieved occupancy, warp stall reasons). One `ncu` per config around
# `kforge-synth-sweep --configs CONFIG --quick-only --reps 1`, profiling the config's launches
# in its first quick-pass run; `--clock-control none` (METHOD.md: leave the clocks alone).
# Writes OUT_DIR/profile.md: every profiled launch in one table (tools/bench/ncu_summary.py:
# duration, DRAM throughput, registers, occupancy, cycles per issued instruction), and
# OUT_DIR/profile-<row>.tgz with the full reports (profile-<row>-<n>.txt per config, -torch.txt):
# two files a row, where a device call returns eight.
#   KFORGE_PROFILE_ROW=id                 the row (`kforge-synth-sweep --rows x` lists them)
#   KFORGE_PROFILE_CONFIGS='cfg|cfg'      configs as the sweep's --details print them
#   KFORGE_PROFILE_TORCH_MODES=M,...      also eager's and torch.compile's kernels for the row
#                                         (tools/bench/torch_compile_times.py --profile, these
#                                         modes): OUT_DIR/profile-<row>-torch.txt, each kernel
#                                         under its NVTX range ROW/FUNCTION[/MODE]
#   KFORGE_PROFILE_LAUNCHES=N             launches profiled per config (default 4: a split's
#                                         two launches, twice)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
ROW=${KFORGE_PROFILE_ROW:-}
CONFIGS=${KFORGE_PROFILE_CONFIGS:-}
TORCH_MODES=${KFORGE_PROFILE_TORCH_MODES:-}
if [[ -z $ROW || (-z $CONFIGS && -z $TORCH_MODES) ]]; then
  # A full round runs every step: this one only does something when asked.
  echo "profile: skipped (set KFORGE_PROFILE_ROW and KFORGE_PROFILE_CONFIGS or" \
    "KFORGE_PROFILE_TORCH_MODES to profile kernels)" |
    tee "$OUT_DIR/profile.md"
  exit 0
fi
LAUNCHES=${KFORGE_PROFILE_LAUNCHES:-4}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [[ -z $NCU ]]; then
  echo "profile: no ncu on this machine (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute)" |
    tee "$OUT_DIR/profile.md"
  exit 1
fi
echo "# ncu on $ROW ($("$NCU" --version | tail -1))" >"$OUT_DIR/profile.md"
SECTIONS=(--section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis
  --section LaunchStats --section WarpStateStats)
rc=0
n=0
IFS='|' read -r -a configs <<<"$CONFIGS"
for config in "${configs[@]}"; do
  n=$((n + 1))
  out=$OUT_DIR/profile-$ROW-$n.txt
  echo "== $config" >"$out"
  "$NCU" --clock-control none --target-processes all --kernel-name regex:'^kf_' \
    --launch-count "$LAUNCHES" "${SECTIONS[@]}" \
    build/bin/kforge-synth-sweep --rows "$ROW" --configs "$config" --quick-only --reps 1 \
    >>"$out" 2>&1 || rc=1
  echo "- \`$config\`: profile-$ROW-$n.txt" >>"$OUT_DIR/profile.md"
done
if [[ -n $TORCH_MODES ]]; then
  rows=$(mktemp)
  out=$OUT_DIR/profile-$ROW-torch.txt
  if build/bin/kforge-synth-sweep --rows "$ROW" --emit-rows "$rows" >"$out" 2>&1; then
    "$NCU" --clock-control none --profile-from-start off --nvtx "${SECTIONS[@]}" \
      python3 tools/bench/torch_compile_times.py --rows-json "$rows" --modes "$TORCH_MODES" \
      --profile >>"$out" 2>&1 || rc=1
  else
    rc=1
  fi
  echo "- eager and torch.compile ($TORCH_MODES): profile-$ROW-torch.txt" >>"$OUT_DIR/profile.md"
fi
reports=("$OUT_DIR"/profile-"$ROW"-*.txt)
{
  echo
  python3 tools/bench/ncu_summary.py "${reports[@]}" || rc=1
  echo
  echo "Full reports: profile-$ROW.tgz"
} >>"$OUT_DIR/profile.md"
tar czf "$OUT_DIR/profile-$ROW.tgz" -C "$OUT_DIR" "${reports[@]##*/}" && rm -f "${reports[@]}"
cat "$OUT_DIR/profile.md"
exit $rc
