#!/bin/bash
# GPU call: the captured-entry GPU tests, then the ticket group norm variants beside the synth winner.
set -u
O=$1/raw; mkdir -p $O; cd "$(dirname "$0")"; K=../build/bin/kforge
python3 mk.py
for s in 128x512 256x256; do $K capture gn$s.pt --inputs in$s.pt --device cuda --out cap$s --top 5 --warmup 1 --iters 3 > $O/cap$s.txt 2>&1; done
pick() {  # pick SHAPE NODES: the target with that many nodes, a group norm among them
  for d in cap$1/targets/*; do python3 -c "import json;t=json.load(open('$d/target.json'));print(len(t['nodes']), ' '.join(n['op'] for n in t['nodes']), '$d')"; done | grep group_norm | awk -v n=$2 '$1==n {print $NF}' | head -1; }
ev() {  # ev SHAPE NAME NODES
  local t=$(pick $1 $3); [[ -n $t ]] || { echo "$2 $1: no target of $3 nodes"; return; }
  local r=$($K eval --target $t --kernel $2.cu --plan $2.json --json --fresh 2>$O/$2-$1.err)
  echo "$r" > $O/$2-$1.json
  python3 -c "
import json,sys
try: r=json.loads(sys.argv[1])
except Exception: print('$2 $1: no json', open('$O/$2-$1.err').read()[-400:]); sys.exit()
v=r.get('verdict'); t=r.get('timing',{})
c=r.get('candidate',{}); e=r.get('eager',{})
print('$2 $1', r.get('verdict'), 'kernel %.1f us' % (1e6*c.get('median_s',0)), 'eager %.1f us' % (1e6*e.get('median_s',0)), c.get('mode'), 'floor %.1f' % (1e6*r.get('floor_s',0)), str(r.get('diagnostics',''))[:300])" "$r"
}
for s in 128x512 256x256; do ls cap$s/targets; done
G=./gen.sh
V128=""; V256=""
add() { $G $1 "$2" $3 $4; V128="$V128 $1"; $G ${1}w "ROWLEN=524288 HW=65536 CPG=8 $2" $3 $4; V256="$V256 ${1}w"; }
add s1 "VPT=4 LAG=4 KEEP=1" 512 4
add s2 "VPT=4 LAG=4 KEEP=0" 512 4
add s3 "VPT=4 LAG=2 KEEP=1" 512 4
add s4 "VPT=4 LAG=8 KEEP=1" 512 4
add s5 "VPT=4 LAG=16 KEEP=1" 512 4
add p1 "VPT=4 LAG=4 KEEP=1 PREFETCH=1" 512 4
add p2 "VPT=4 LAG=4 KEEP=1 PREFETCH=1" 256 8
add p3 "VPT=8 LAG=4 KEEP=1 PREFETCH=1" 256 8
add p4 "VPT=8 LAG=6 KEEP=1 PREFETCH=1" 256 8
add p5 "VPT=2 LAG=4 KEEP=1 PREFETCH=1" 512 4
add p6 "VPT=4 LAG=3 KEEP=0 PREFETCH=1" 256 8
add p7 "VPT=8 LAG=4 KEEP=1 PREFETCH=1" 512 2
for v in $V128 gn-vae-128x512-fp32.0; do ev 128x512 $v 1; done
for v in $V256 gn-vae-256x256-fp32.0; do ev 256x256 $v 1; done
for v in s1 p1 p2 p3 gn-vae-128x512-fp32.0; do ev 128x512 $v 1; done
tar czf $1/raw.tgz -C $O .
