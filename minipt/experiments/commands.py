"""``minipt experiment NAME`` and ``minipt experiment claims``: the commands behind the
papers' comparisons and the claims ledger (``cli.py`` parses their arguments)."""
from __future__ import annotations

import argparse


def cmd_claims(args: argparse.Namespace) -> int:
    """``minipt experiment claims``: the ledger from the committed runs; ``--run NAME``
    first runs NAME over ``--seeds`` at the budget and commits it to the ledger."""
    import json
    from pathlib import Path

    from . import ledger
    budget = "full" if args.full else args.budget
    for name in args.run or ():
        print(f"minipt experiment claims: running {name} ({budget}) over seeds {', '.join(map(str, args.seeds))}")
        print("written: " + str(ledger.save(ledger.run_seeds(name, budget, args.seeds, progress=True))))
    rows = ledger.rows()
    print(ledger.table(rows))
    print("verdicts: " + ", ".join(f"{v} {n}" for v, n in ledger.counts(rows).items()))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        print(f"written: {args.json}")
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    """``minipt experiment NAME``: one comparison into --out (``claims``: the ledger)."""
    from pathlib import Path

    from . import EXPERIMENTS, get
    if args.name == "claims":
        return cmd_claims(args)
    from .report import check_folder, table, write
    module = get(args.name)
    out = Path(args.out or f"runs/experiment-{args.name}")
    check_folder(out, overwrite=args.overwrite)                        # before minutes of training
    budget = "full" if args.full else args.budget
    print(f"minipt experiment {args.name} ({budget}): {EXPERIMENTS[args.name][1]}")
    result = module.run(budget, seed=args.seed, progress=True)
    paths = write(result, out, f"{args.name} ({budget} budget)", overwrite=args.overwrite)
    print(table(result["rows"]))
    print("written: " + ", ".join(map(str, paths)))
    return 0
