#!/bin/bash
# gen.sh NAME "DEFINES" BLOCK BPS -> NAME.cu NAME.json
name=$1; defs=$2; block=$3; bps=$4
{ for d in $defs; do echo "#define ${d%%=*} ${d#*=}"; done; echo "#define BLOCK $block"; cat gn_ticket.cu; } > $name.cu
sed "s/BLOCKV/$block/; s/BPS/$bps/" plan.json > $name.json
