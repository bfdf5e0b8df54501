"""benchmarks/harness.py --isa: the script starts again with each library on the code it
would run on a CPU without AVX-512, and says what each one runs, read back from it."""
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPT = f"""
import json, sys
sys.path.insert(0, {str(BENCH)!r})
import harness
harness.apply_isa(sys.argv[1])
print(json.dumps(harness.isa_info()))
"""


def _isa(tmp_path, isa: str) -> dict:
    script = tmp_path / "isa.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), isa], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_avx2_puts_every_library_on_its_avx2_code(tmp_path):
    info = _isa(tmp_path, "avx2")
    assert info["OpenBLAS"].lower() == "haswell"
    assert info["Numba"] == "haswell" and info["IR kernels"] == "off"
    if "torch" in info:
        assert info["torch"] == "AVX2"


def test_native_leaves_them_alone(tmp_path):
    info = _isa(tmp_path, "native")
    assert info["Numba"] == "host"
    assert info["OpenBLAS"].lower() != "haswell" or "avx512f" not in Path("/proc/cpuinfo").read_text()
