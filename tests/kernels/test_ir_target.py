"""``calls.ir_on``: the IR kernels follow the CPU Numba compiles for, not only this one."""
import llvmlite.binding as llvm
from numba.core import config

from minipt.kernels import calls

HOST_AVX512 = bool(llvm.get_host_cpu_features().get("avx512f", False))


def test_off_when_numba_compiles_for_a_cpu_without_avx512(monkeypatch):
    monkeypatch.delenv("MINIPT_TILES", raising=False)
    monkeypatch.setattr(config, "CPU_NAME", "haswell")
    monkeypatch.setattr(config, "CPU_FEATURES", "")
    assert calls.ir_on() is False
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx2,+fma")
    assert calls.ir_on() is False


def test_on_when_the_named_cpu_is_given_avx512(monkeypatch):
    monkeypatch.delenv("MINIPT_TILES", raising=False)
    monkeypatch.setattr(config, "CPU_NAME", "skylake-avx512")
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx2,+avx512f,+fma")
    assert calls.ir_on() is True


def test_the_host_decides_without_a_cpu_name_and_tiles_0_turns_them_off(monkeypatch):
    monkeypatch.delenv("MINIPT_TILES", raising=False)
    for name in (None, "host"):
        monkeypatch.setattr(config, "CPU_NAME", name)
        assert calls.ir_on() is HOST_AVX512
    monkeypatch.setenv("MINIPT_TILES", "0")
    assert calls.ir_on() is False
