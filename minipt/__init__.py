"""minipt: pretrained language models built from scratch in NumPy.

Every layer is a pure forward/backward pair (``minipt.ops``); modules own parameters
and gradients (``minipt.nn``); ``minipt.gradcheck`` checks any of them against
central differences in float64.
"""
from .core import Module, check_module, check_op, gradcheck

__version__ = "0.1.0"
__all__ = ["Module", "gradcheck", "check_op", "check_module", "__version__"]
