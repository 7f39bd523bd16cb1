#!/usr/bin/env python3
"""The fastest configs of a sweep, each beside its twin with one switch flipped: the --configs
of a kforge-synth-sweep run that times a switch's two values on the same configs (a capped
sweep samples configs at random, so the two values of one config rarely both appear), whose
details compare_sweeps.py DIR --pair PARAM=A,B then reads.

  twin_configs.py DIR ROW PARAM=A,B [--top N] [--where name=value;...]
      prints the N fastest configs of ROW (quick pass, in DIR's --details TSVs) whose PARAM is
      A and that have every --where value, each followed by the same config with PARAM=B,
      '|'-joined. B must be a value the config's family allows with the rest of the config
      (kforge-synth-sweep refuses the row otherwise, naming the config).
  twin_configs.py DIR ROW [--top N] [--where name=value;...]
      the N fastest configs alone: the --configs that time them again with another build
      (tools/gpu-steps/synth_configs_ab.sh).
"""
import argparse
import sys

from sweep_details import params, read_quick_times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("details", help="synth-sweep-details/ directory of a sweep")
    ap.add_argument("row", help="row id, e.g. gn-vae-256x256-fp32")
    ap.add_argument("pair", metavar="PARAM=A,B", nargs="?",
                    help="the switch and its two values (none: the fastest configs alone)")
    ap.add_argument("--top", type=int, default=20,
                    help="configs (with PARAM=A) to print (default 20)")
    ap.add_argument("--where", default="", help="name=value;... every config must have")
    args = ap.parse_args(argv)
    name, _, values = (args.pair or "").partition("=")
    a, _, b = values.partition(",")
    if args.pair is not None and (not name or not a or not b):
        sys.exit(f"twin_configs: '{args.pair}' is not PARAM=A,B (e.g. split_mode=sync,sync_keep)")
    rows = read_quick_times(args.details, "twin_configs")
    if args.row not in rows:
        sys.exit(f"twin_configs: {args.details} has no details of row '{args.row}' "
                 f"(rows there: {', '.join(sorted(rows)) or 'none'})")
    where = params(args.where)
    if name:
        where[name] = a
    chosen = [c for c, _ in sorted(rows[args.row].items(), key=lambda kv: kv[1])
              if all(params(c).get(k) == v for k, v in where.items())]
    if not chosen:
        sys.exit(f"twin_configs: no passing config of '{args.row}' has "
                 + ";".join(f"{k}={v}" for k, v in where.items()))
    if not name:
        print("|".join(chosen[:args.top]))
        return
    twins = []
    for config in chosen[:args.top]:
        twins += [config, ";".join(f"{k}={b if k == name else v}"
                                   for k, v in params(config).items())]
    print("|".join(twins))


if __name__ == "__main__":
    main()
