"""Core: the Module base class, input checks and the gradient checker."""
from .checks import check_float, check_ids, check_same_dtype
from .gradcheck import GradcheckResult, check_module, check_op, gradcheck
from .module import Module, eval_mode

__all__ = ["Module", "eval_mode", "gradcheck", "check_op", "check_module", "GradcheckResult",
           "check_float", "check_ids", "check_same_dtype"]
