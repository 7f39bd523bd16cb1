#!/usr/bin/env bash
# ab.sh, then the SD VAE model run (round2.sh), with the prefetch on where it beat its twin on
# both rows in both reps (kforge / eager of one invocation).
OUT=$1
start=$SECONDS
bash .carry/ab.sh $OUT
pf=$(awk '/prefetch 0/ && /flush dirty/ {split($0,a,"eager "); split(a[2],e," "); split($0,b,"kforge "); split(b[2],k," "); base[$1" "++nb[$1]]=k[1]/e[1]}
          /prefetch 1/ {split($0,a,"eager "); split(a[2],e," "); split($0,b,"kforge "); split(b[2],k," "); pre[$1" "++np[$1]]=k[1]/e[1]}
          END {ok=1; n=0; for (x in pre) {n++; if (!(x in base) || pre[x] >= base[x]) ok=0}; print (ok && n==4) ? 1 : 0}' $OUT/ab.txt)
echo "model run with prefetch=$pf (after $((SECONDS - start)) s)" | tee -a $OUT/ab.txt
left=$((585 - (SECONDS - start)))
sed -i "s/timeout 545/timeout $((left < 545 ? left : 545))/" .carry/round2.sh
bash .carry/round2.sh $OUT $pf
