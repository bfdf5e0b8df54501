"""Command line: ``minipt gradcheck`` (and later ``train``, ``sample``, ``bench``)."""
from __future__ import annotations

import argparse
import sys
import time


def cmd_gradcheck(args: argparse.Namespace) -> int:
    from .core.gradcheck import TOLERANCE
    from .selfcheck import all_cases

    cases = [c for c in all_cases() if not args.only or args.only in c.name]
    if not cases:
        print(f"no gradcheck case matches {args.only!r}", file=sys.stderr)
        return 2
    print(f"{'name':<28} {'shapes':<34} {'inputs':>9} {'params':>9}  result")
    failed = 0
    start = time.perf_counter()
    for case in cases:
        res = case.run()
        fmt = lambda k: f"{res.max_error(k):9.1e}" if any(a.kind == k for a in res.arrays) else f"{'-':>9}"
        ok = "pass" if res.passed else "FAIL"
        failed += not res.passed
        print(f"{case.name:<28} {case.shapes:<34} {fmt('input')} {fmt('param')}  {ok}")
        if not res.passed:
            w = res.worst
            print(f"    worst: {w.name}{list(w.where)} analytic {w.analytic:.6g} numeric {w.numeric:.6g}")
    took = time.perf_counter() - start
    print(f"\n{len(cases) - failed}/{len(cases)} passed (max relative error < {TOLERANCE:g}"
          f" in float64, random upstream gradient) in {took:.1f}s")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minipt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("gradcheck", help="check every op's and module's backward against central differences")
    p.add_argument("--only", default="", help="run only cases whose name contains this text")
    p.set_defaults(func=cmd_gradcheck)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
