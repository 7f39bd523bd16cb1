# Sourced by the steps that evaluate chosen kernels on captured targets (ticket_reference.sh;
# docs/benchmarks/2026-12-06-session42/ordered-variants.sh).

# eval_row KFORGE TARGET SHAPE LABEL KERNEL PLAN: `kforge eval` of KERNEL with launch plan PLAN
# on the target directory TARGET (the worker's timing method, validation included), printed as
# one row of | shape | kernel | verdict | µs | % of floor |; a failed evaluation's row says why.
# Leaves result.json and eval.err in the working directory.
eval_row() {
  "$1" eval --target "$2" --kernel "$5" --plan "$6" --json --fresh >result.json 2>eval.err
  python3 - "$3" "$4" <<'PY'
import json, sys
shape, label = sys.argv[1:3]
try:
    r = json.load(open("result.json"))
except Exception:
    print(f"| {shape} | {label} | no result: {open('eval.err').read()[-200:].strip()!r} | | |")
    sys.exit()
us = 1e6 * r.get("candidate", {}).get("median_s", 0)
floor = 1e6 * r.get("floor_s", 0)
pct = f"{100 * floor / us:.0f}%" if us > 0 and floor > 0 else ""
print(f"| {shape} | {label} | {r.get('verdict')} | {us:.1f} | {pct} |")
PY
}
