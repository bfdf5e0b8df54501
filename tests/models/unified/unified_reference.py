"""Plain-NumPy references for the unified models' tests: one position at a time, from
the papers' equations, sharing no code with minipt's layers."""
import math

import numpy as np


def ln(x, w, b, eps):
    return (x - x.mean()) / math.sqrt(x.var() + eps) * w + b


def gelu(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def block(xs, p, sees, n_head, eps, prenorm=False, act=gelu):
    """One Transformer block over the list of vectors ``xs``; ``sees(i, j)`` says whether
    position i may attend to j. ``p`` maps the block's parameter names to arrays."""
    T, C = len(xs), len(xs[0])
    D = C // n_head
    W, bW = p["attn.c_attn.weight"], p["attn.c_attn.bias"]
    norm1 = (lambda v: ln(v, p["ln_1.weight"], p["ln_1.bias"], eps))
    norm2 = (lambda v: ln(v, p["ln_2.weight"], p["ln_2.bias"], eps))
    a_in = [norm1(x) for x in xs] if prenorm else xs
    q = [W[:C] @ x + bW[:C] for x in a_in]
    k = [W[C:2 * C] @ x + bW[C:2 * C] for x in a_in]
    v = [W[2 * C:] @ x + bW[2 * C:] for x in a_in]
    out = []
    for i in range(T):
        heads = np.zeros(C)
        keys = [j for j in range(T) if sees(i, j)]
        for n in range(n_head if keys else 0):          # a row that sees nothing outputs zero
            sl = slice(n * D, (n + 1) * D)
            s = np.array([q[i][sl] @ k[j][sl] / math.sqrt(D) for j in keys])
            e = np.exp(s - s.max())
            heads[sl] = sum(w * v[j][sl] for w, j in zip(e / e.sum(), keys))
        a = p["attn.c_proj.weight"] @ heads + p["attn.c_proj.bias"]
        if prenorm:
            h = xs[i] + a
            f = p["mlp.c_proj.weight"] @ act(p["mlp.c_fc.weight"] @ norm2(h) + p["mlp.c_fc.bias"]) + p["mlp.c_proj.bias"]
            out.append(h + f)
        else:
            h = norm1(xs[i] + a)
            f = p["mlp.c_proj.weight"] @ act(p["mlp.c_fc.weight"] @ h + p["mlp.c_fc.bias"]) + p["mlp.c_proj.bias"]
            out.append(norm2(h + f))
    return out


def block_params(model, prefix):
    """{name inside the block: array} for the block whose names start with ``prefix``."""
    return {n[len(prefix):]: a for n, a in model.named_parameters() if n.startswith(prefix)}
