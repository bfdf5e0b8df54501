"""Core: the Module base class, input checks and the gradient checker."""
from .checks import check_finite, check_float, check_ids, check_same_dtype
from .gradcheck import GradcheckResult, check_module, check_op, gradcheck
from .module import Module

__all__ = ["Module", "gradcheck", "check_op", "check_module", "GradcheckResult",
           "check_float", "check_ids", "check_same_dtype", "check_finite"]
