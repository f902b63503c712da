"""On the GPU: rna rounding for the tensor cores as the add of half a tf32 ulp
(`fragment_io.tf32_for_mma`) gives every word of D that the same kernels give with
`cvt.rna.tf32.f32`, at each place that rounds. The operands cover ties, carries into the exponent,
subnormals, values that round up to infinity, and NaNs whose payload lies in the low 13 bits only
(which cvt.rna, as ptxas assembles it, makes infinities). D is also word for word the emulator's,
for either form (its model of cvt.rna is ptxas's)."""

import numpy as np
import pytest

from tilemma.compiler.driver.runner import run_compiled

from tests.tf32_for_mma_cases import KERNELS, d_words, operands, with_cvt
from tests.wgmma_cases import compiled, is_sm90


@pytest.mark.skipif(not is_sm90(), reason="the kernels are sm_90's and sm_90a's")
@pytest.mark.parametrize("spec, sm, options", [k[1:] for k in KERNELS], ids=[k[0] for k in KERNELS])
def test_the_add_gives_cvt_s_words_on_the_gpu(spec, sm, options):
    k = compiled(spec, sm, **options)
    inputs = operands(spec, 21, nan_payloads=True)
    got, want = (run_compiled(x, 21, "gpu", inputs=inputs) for x in (k, with_cvt(k)))
    d = d_words(got)
    assert np.array_equal(d, d_words(want))
    for emulated in (run_compiled(x, 21, "emulator", inputs=inputs) for x in (k, with_cvt(k))):
        assert np.array_equal(d, d_words(emulated))
