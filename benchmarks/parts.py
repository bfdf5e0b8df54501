"""Where a training step spends its time, split into the same parts for minipt and torch:
matmuls, attention, norms, activations, loss, optimiser, embedding and glue.

* **minipt**: cProfile over whole steps. Each function's own time (``tottime``) goes to
  the part its file names (``MINIPT_RULES``: ``minipt/ops/linear.py`` is matmuls ...).
  A function no rule names (NumPy's Python wrappers, ``ndarray`` methods, shared helpers
  such as ``ops/softmax.py``, argument checks) takes the parts of its callers, weighted by
  the time it spent under each, its callees' included (a wrapper's own time is about the
  same per call whatever the size of the work below it: NumPy's ``reduce`` under its
  ``_sum`` wrapper, or a kernel under ``threads.in_parts``, weighted so, went half to a
  small caller); with no named caller up the chain it is glue. Numba
  kernels and NumPy's ``@`` and ufuncs are not calls cProfile sees: their time is the
  calling function's own time, so a kernel counts where its op is.
* **torch**: ``torch.profiler`` (CPU activities, no shapes or stacks), each event's self
  time. A forward event goes to the part of its outermost enclosing event that a rule
  names (``TORCH_RULES``: ``aten::linear`` -> ``aten::addmm`` is matmuls,
  ``aten::scaled_dot_product_attention`` and everything under it attention, the
  optimiser's ``Optimizer.step#AdamW.step`` record_function optimiser ...). A backward
  node goes to the part of the forward op that made it (the profiler's ``sequence_nr``
  links them), so ``AddmmBackward0`` is matmuls and the bmm of the math attention path
  attention. The rest (adds, views, copies, fills, gradient accumulation) is glue, and so
  is the Python time between ops: the profiled wall time minus the ops' self times.

With the stacks' batch in parts (``--batch-parts``, minipt/nn/batch_parts.py), cProfile
sees the caller's thread only: minipt's column is then part 0's time (a part of the batch
on one thread) while the other parts run at the same time on their own threads, and the
wait for the slower part is glue.

Both are per step, from a warmed-up step closure profiled in rounds of BLOCK steps, the
two sides alternating; each part is its median over the rounds (``compare``).
Profiling costs time on both sides, so a profiled step runs longer than a timed one.
Measured on the 2-core development machine under load (load average ~15; a quiet
machine costs less): cProfile adds 1.5 us per Python call, torch.profiler 4.4 us per op
event. A minipt step makes 2.6k (GPT S) to 7.6k (GPT L) Python calls, 3.3k-8.3k for BERT,
5.0k-14.3k for T5; a torch step records 1.8k-4.8k, 2.1k-5.1k and 4.6k-12.8k events. So
minipt's profile carries about 4-11 ms per step (GPT S-L), most of it in glue and the
ops' own Python lines, and torch's 8-21 ms spread over every part; at size S that is a
large share of a step, so read the part ratios at M and L. Each table prints both
profiled totals beside the unprofiled median step times of the timed rounds.
"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from collections import defaultdict

PARTS = ("matmuls", "attention", "norms", "activations", "loss", "optimiser", "embedding", "glue")

MINIPT_RULES = (  # (part, substrings of "path:function"), first match wins
    ("matmuls", ("minipt/ops/linear.py", "minipt/kernels/linear.py", "minipt/kernels/tiles.py:linear", "minipt/kernels/tiles.py:takes_linear",
                 "minipt/kernels/tiles.py:pack", "minipt/kernels/tiles.py:<lambda>")),   # a linear on the tiles
    ("attention", ("minipt/ops/attention.py", "minipt/ops/relative_attention.py", "minipt/kernels/attention.py",
                   "minipt/kernels/attention_rows.py",
                   "minipt/kernels/fused_attention.py")),
    ("norms", ("minipt/ops/norms.py", "minipt/kernels/layernorm.py")),
    ("activations", ("minipt/ops/activations.py", "minipt/kernels/gelu", "minipt/kernels/vgelu.py",
                     "minipt/kernels/relu.py")),
    ("loss", ("minipt/ops/cross_entropy.py", "minipt/kernels/cross_entropy.py")),
    ("optimiser", ("minipt/optim/", "minipt/kernels/adam.py")),
    ("embedding", ("minipt/ops/embedding.py", "minipt/kernels/embedding.py", "minipt/ops/positions.py")),
)

TORCH_RULES = (  # (part, substrings of a lower-cased event name), first match wins
    ("optimiser", ("optimizer.step",)),
    ("attention", ("scaled_dot_product", "attention")),
    ("loss", ("cross_entropy", "nll_loss", "log_softmax")),
    ("norms", ("layer_norm", "rms_norm")),
    ("activations", ("gelu", "relu", "silu")),
    ("embedding", ("aten::embedding",)),
    ("matmuls", ("aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
)
BACKWARD = "autograd::engine::evaluate_function"


def _rule(rules, name: str) -> str | None:
    for part, keys in rules:
        if any(k in name for k in keys):
            return part
    return None


# -- minipt: cProfile ---------------------------------------------------------------------
def minipt_parts(step, steps: int) -> dict[str, float]:
    """Seconds per step of each part of PARTS, cProfile over ``steps`` calls of ``step``."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    return split_profile(pstats.Stats(prof).stats, steps)


def split_profile(stats: dict, steps: int) -> dict[str, float]:
    """``pstats.Stats.stats`` ({(file, line, function): (cc, nc, tottime, cumtime, callers)})
    -> seconds per step of each part (see the module docstring for the rules)."""
    memo: dict = {}

    def shares(key, active) -> dict[str, float]:
        """part -> fraction of ``key``'s own time."""
        if key in memo:
            return memo[key]
        own = _rule(MINIPT_RULES, f"{key[0].replace(chr(92), '/')}:{key[2]}")
        if own:
            return memo.setdefault(key, {own: 1.0})
        callers = stats[key][4] if key in stats else {}
        # each caller edge holds (calls, primitive calls, tottime, cumtime) spent under that caller
        weights = {c: edge[3] for c, edge in callers.items() if c not in active}
        total = sum(weights.values())
        if not weights:
            return memo.setdefault(key, {"glue": 1.0})
        if total <= 0:
            weights, total = {c: 1.0 for c in weights}, float(len(weights))
        out: dict[str, float] = defaultdict(float)
        for caller, w in weights.items():
            for part, f in shares(caller, active | {key}).items():
                out[part] += f * w / total
        memo[key] = dict(out)
        return memo[key]

    totals = dict.fromkeys(PARTS, 0.0)
    for key, (_, _, tottime, _, _) in stats.items():
        for part, f in shares(key, frozenset()).items():
            totals[part] += f * tottime / steps
    return totals


# -- torch: torch.profiler ----------------------------------------------------------------
def torch_parts(torch, step, steps: int) -> dict[str, float]:
    """Seconds per step of each part of PARTS, torch.profiler over ``steps`` calls of
    ``step``; the Python time between ops (wall minus the ops' self times) is glue."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t0
    totals = split_events(prof.events(), steps)
    totals["glue"] += max(0.0, wall / steps - sum(totals.values()))
    return totals


def split_events(events, steps: int) -> dict[str, float]:
    """torch.profiler FunctionEvents (``cpu_parent``, ``name``, ``sequence_nr``,
    ``self_cpu_time_total`` in us) -> seconds per step of each part."""
    def path(e):                                          # root ... e
        out = []
        while e is not None:
            out.append(e)
            e = e.cpu_parent
        return out[::-1]

    forward: dict[int, str] = {}                          # sequence_nr -> part of the forward op
    placed = []
    for e in events:
        chain = path(e)
        root = chain[0]
        named = next((p for p in (_rule(TORCH_RULES, c.name.lower()) for c in chain) if p), None)
        if BACKWARD in root.name:
            placed.append((e, root.sequence_nr, named))
            continue
        if named and e.sequence_nr >= 0:
            forward.setdefault(e.sequence_nr, named)
        placed.append((e, None, named or "glue"))
    totals = dict.fromkeys(PARTS, 0.0)
    for e, seq, part in placed:
        if seq is not None:                               # a backward node: its forward op's part
            part = forward.get(seq) or part or "glue"
        totals[part] += e.self_cpu_time_total * 1e-6 / steps
    return totals


# -- the table ----------------------------------------------------------------------------
BLOCK = 3        # profiled steps of one side in a row, a round


def compare(torch, minipt_step, torch_step, steps: int) -> dict:
    """Both sides' parts, seconds per step (torch's only if ``torch_step`` is given), from
    ``steps`` profiled steps per side in rounds of BLOCK: in each round a side runs one
    step unprofiled, then BLOCK profiled ones (their mean), the sides alternating; each
    part is its median over the rounds, so that a slow round moves no part.

    Why rounds and medians: timed one by one (no profiler), BERT L's steps with the batch
    in two parts waited under 3 ms for the second part's thread in most steps and 13-40 ms
    in some (steps of 210 against 260-283 ms), at no time in particular and with no page
    faults to match; in a mean over 5 profiled steps that had put BERT L's glue at 16 ms
    in one run against 11 in the other. Why a step unprofiled first: right after the other
    side's step (its threads still spinning, its data in cache), one profiled step of
    BERT S had 4.0 ms of glue against 3.1."""
    block = min(BLOCK, steps)
    per_round: dict[str, list] = {"minipt": [], "torch": []}
    for _ in range(max(1, steps // block)):
        minipt_step()
        per_round["minipt"].append(minipt_parts(minipt_step, block))
        if torch_step is not None:
            torch_step()
            per_round["torch"].append(torch_parts(torch, torch_step, block))
    out = {"steps": steps, "rounds": len(per_round["minipt"]), "minipt": median_parts(per_round["minipt"])}
    if torch_step is not None:
        out["torch"] = median_parts(per_round["torch"])
    return out


def median_parts(splits: list[dict[str, float]]) -> dict[str, float]:
    """Each part's median over the rounds' splits (a part's own median: the medians of
    the parts need not add up to any one round's total)."""
    return {part: statistics.median(s[part] for s in splits) for part in PARTS}


SLOWER = 1.10          # a part is flagged when minipt takes more than this times torch's time


def slower(minipt_s: float, torch_s: float | None) -> bool:
    """Whether minipt's part is past the line: more than SLOWER times torch's, and at least
    0.1 ms a step (below that a ratio is noise)."""
    return torch_s is not None and minipt_s > SLOWER * torch_s and minipt_s > 1e-4


def print_table(title: str, parts: dict, minipt_step_s: float, torch_step_s: float | None):
    """part | minipt ms/step | torch ms/step | torch/minipt (> 1: minipt faster), flagging
    the parts that are ``slower``."""
    mp, tp = parts["minipt"], parts.get("torch")
    rounds = parts.get("rounds", 1)
    print(f"{title}: per step, median of {rounds} rounds of {parts['steps'] // rounds} profiled steps, the sides "
          "alternating (minipt cProfile, torch torch.profiler)")
    print(f"  {'part':<12} {'minipt ms':>10} {'torch ms':>10} {'torch/minipt':>13}")

    def line(name, a, b, flag=True):
        ratio = f"{b / a:12.2f}x" if b is not None and a > 0 else f"{'-':>13}"
        mark = "  <- minipt >10 % slower" if flag and slower(a, b) else ""
        print(f"  {name:<12} {1e3 * a:10.2f} {'-' if b is None else f'{1e3 * b:.2f}':>10} {ratio}{mark}")

    for part in PARTS:
        line(part, mp[part], tp[part] if tp else None)
    line("profiled", sum(mp.values()), sum(tp.values()) if tp else None, flag=False)    # the medians' sum
    line("timed step", minipt_step_s, torch_step_s, flag=False)
