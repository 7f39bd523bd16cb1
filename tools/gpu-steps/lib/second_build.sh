# Sourced by the steps that judge a kernel change against a second build (synth_sweep_ab.sh,
# synth_configs_ab.sh): that build's sweep executable, which tools/gpu-pack carries to .carry/ab
# with KFORGE_PACK_AB_BUILD=DIR.
AB=.carry/ab/bin/kforge-synth-sweep

# second_build_or_skip STEP REPORT: true when the second build travelled; else says the step
# is skipped, in REPORT too (a full round runs every step), and is false.
second_build_or_skip() {
  [[ -x $AB ]] && return 0
  echo "$1: skipped (no second build: KFORGE_PACK_AB_BUILD=DIR tools/gpu-pack)" | tee "$2"
  return 1
}
