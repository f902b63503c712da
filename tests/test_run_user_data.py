"""`tilemma run --input NAME=FILE.npy --save DIR`: a compiled kernel run on the user's matrices."""

import numpy as np
import pytest

from tilemma.compiler.driver import cli


def _gemm(tmp_path, *extra):
    path = tmp_path / "g.mlir"
    cli_args = ["gemm", "--m", "37", "--n", "72", "--k", "96", "--a", "f16", "--b", "f16", "--acc", "f32", *extra]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(cli_args) == 0
    path.write_text(out.getvalue())
    return path


@pytest.mark.parametrize("stages", ["-1", "0"])  # the staged schedule and fragments from global memory
def test_user_matrices_give_their_product(tmp_path, capsys, stages):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((37, 96)) * 2.0 ** rng.integers(-8, 8, (37, 96))).astype(np.float16)
    b = rng.standard_normal((96, 72)).astype(np.float16)
    c = rng.standard_normal((37, 72)).astype(np.float32)
    for name, x in (("a", a), ("b", b), ("c", c)):
        np.save(tmp_path / f"{name}.npy", x)
    g = _gemm(tmp_path)
    args = ["run", str(g), "--on", "emulator", "--stages", stages, "--save", str(tmp_path / "out")]
    args += [f"--input={n}={tmp_path / (n + '.npy')}" for n in "abc"]
    assert cli.main(args) == 0
    [saved] = list((tmp_path / "out").glob("*.d.npy"))
    d = np.load(saved)
    assert d.shape == (37, 72) and d.dtype == np.float32
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)
    assert np.all(np.abs(d - want) <= 97 * 2.0**-23 * scale + 1e-30)  # every element, f32 accumulation bound
    assert "PASS" in capsys.readouterr().out


def test_bad_inputs_are_refused_with_the_reason(tmp_path, capsys):
    g = _gemm(tmp_path)
    np.save(tmp_path / "wide.npy", np.zeros((37, 95), np.float16))
    np.save(tmp_path / "f32.npy", np.zeros((37, 96), np.float32))
    cases = [
        (f"a={tmp_path / 'wide.npy'}", "input a: shape (37, 95), but the kernel's a is 37x96 (f16)"),
        (f"a={tmp_path / 'f32.npy'}", "input a: dtype float32, but f16 elements are given as float16"),
        (f"q={tmp_path / 'f32.npy'}", "no argument 'q'; its arguments are a, b, c, d"),
        ("a", "expected NAME=FILE.npy"),
        (f"a={tmp_path / 'missing.npy'}", "cannot read"),
    ]
    for spec, message in cases:
        assert cli.main(["run", str(g), "--on", "emulator", f"--input={spec}"]) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
