import sys, time
from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.driver.runner import run_compiled
from tests.wgmma_cases import compiled
m = int(sys.argv[1]); p = int(sys.argv[2])
spec = GemmSpec(m, m, m, "f16", "f16", "f32", pre_compressed=True)
k = compiled(spec, wgmma=True, producers=p)
print(k.abi.config, k.abi.block if hasattr(k.abi, "block") else "", flush=True)
t = time.time()
r = run_compiled(k, 1, "gpu")
print(m, p, r.line()[60:260], f"{time.time()-t:.1f}s", flush=True)
