"""The compile cache on disk (`compiler/driver/cache.py`): hits and misses, what the key covers,
entries that are not to be trusted, several processes at once, the CLI, and turning it off. Each
test has its own cache folder."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tilemma
from tests.inprocess import run_main
from tilemma.compiler.driver import cache, cli
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.runtime.ptxas import find_ptxas

TEXT = str(gemm_module(GemmSpec(37, 91, 53, "f16", "f16", "f32")))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TILEMMA_CACHE_DIR", str(path))
    monkeypatch.delenv("TILEMMA_TUNE_CACHE", raising=False)
    return path


def files(folder: Path, kind: str = "compile") -> list[Path]:
    return sorted(folder.glob(f"*.{kind}")) if folder.is_dir() else []


def served(kernels) -> bool:
    return all(isinstance(k.compiled, cache.CachedKernel) for k in kernels)


def rewrite(path: Path, change) -> None:
    """Rewrite an entry's payload through `change` (dict -> None), with a header that matches it:
    a well-formed entry whose contents the test chose."""
    data = path.read_bytes()
    header, payload = cache._split(data)
    body = json.loads(payload)
    change(body)
    payload = json.dumps(body).encode()
    header.update(size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    path.write_bytes(cache.MAGIC + json.dumps(header).encode() + b"\n" + payload)


# ----------------------------------------------------------------------------------- hits, keys


def test_second_compile_is_served_from_the_cache(folder):
    [first] = tilemma.compile(TEXT)
    assert not served([first]) and len(files(folder)) == 1
    [second] = tilemma.compile(TEXT)
    assert served([second])
    assert (second.name, second.ptx, second.abi, second.grid, second.block, second.shared_bytes) == \
        (first.name, first.ptx, first.abi, first.grid, first.block, first.shared_bytes)
    assert second.abi.to_json() == first.abi.to_json() and second.abi.config == first.abi.config
    assert second.compiled.variant == first.compiled.variant
    # what the entry does not keep (the IR) is recompiled when a caller needs it
    assert second.compiled.gemm.m == 37 and second.compiled.instruction == first.compiled.instruction
    assert len(files(folder)) == 1


def test_served_entry_is_what_is_returned(folder):
    """The returned PTX is the entry's: proof that the passes did not run."""
    tilemma.compile(TEXT)
    [entry] = files(folder)
    rewrite(entry, lambda body: body["modules"].__setitem__(0, body["modules"][0] + "// from the cache\n"))
    [k] = tilemma.compile(TEXT)
    assert k.ptx.endswith("// from the cache\n")


@pytest.mark.parametrize("change", [
    dict(text=TEXT.replace("gemm_37x91x53", "other_37x91x53")),
    dict(sm="80"),
    dict(options={"stages": 0}),
    dict(options={"warps": "1x2"}),
    dict(options={"ptx": "8.7"}),
], ids=["ir", "target", "stages", "warps", "ptx"])
def test_key_covers_input_target_and_options(folder, change):
    tilemma.compile(TEXT, sm="90")
    [k] = tilemma.compile(change.get("text", TEXT), sm=change.get("sm", "90"), **change.get("options", {}))
    assert not served([k]) and len(files(folder)) == 2
    [again] = tilemma.compile(change.get("text", TEXT), sm=change.get("sm", "90"), **change.get("options", {}))
    assert served([again]) and again.ptx == k.ptx


def test_tuning_cache_contents_are_in_the_key(folder, tmp_path):
    from tilemma.compiler.core import configs

    tune = tmp_path / "tune.json"
    configs.save(str(tune), {"sm_90/f16xf16->f32/small": configs.Config("1x2", "2x2", 0)}, {})
    spec = str(gemm_module(GemmSpec(256, 256, 256, "f16", "f16", "f32")))
    [a] = tilemma.compile(spec, tune_cache=str(tune))
    configs.save(str(tune), {"sm_90/f16xf16->f32/small": configs.Config("2x1", "2x2", 0)}, {})
    [b] = tilemma.compile(spec, tune_cache=str(tune))
    assert not served([b]) and (a.abi.config, b.abi.config) == ("warps=1x2 warp-tile=2x2 stages=0",
                                                                "warps=2x1 warp-tile=2x2 stages=0")


def test_what_the_key_leaves_out_does_not_change_the_result(folder):
    """The file name only names the input in diagnostics (errors are never cached)."""
    [a] = tilemma.compile(TEXT, filename="a.mlir", cache=False)
    [b] = tilemma.compile(TEXT, filename="dir/b.mlir", cache=False)
    assert a.ptx == b.ptx and a.abi == b.abi


def test_another_tilemma_does_not_hit(folder, monkeypatch):
    tilemma.compile(TEXT)
    monkeypatch.setattr(cache, "tilemma_key", lambda: "0.0.1+another")
    [k] = tilemma.compile(TEXT)
    assert not served([k]) and len(files(folder)) == 2


def test_module_op_input_is_keyed_by_its_printed_form(folder):
    from tilemma.compiler.driver.pipeline import parse

    module, _ = parse(TEXT, "m")
    [a] = tilemma.compile(module)
    [b] = tilemma.compile(module)
    assert not served([a]) and served([b]) and a.ptx == b.ptx


def test_notes_of_a_compile_are_printed_again_when_served(folder, tmp_path, capfd):
    """The note a compile prints (a tuned configuration that does not apply) comes with the
    cached result too."""
    from tilemma.compiler.core import configs

    tune = tmp_path / "tune.json"
    # one warp cannot gather a 16 x 128 stage of odd-K rows (37x91x53: rows not 4-byte aligned)
    configs.save(str(tune), {"sm_90/f16xf16->f32/small": configs.Config("1x1", "1x1", 3, 128)}, {})
    for _ in range(2):
        tilemma.compile(TEXT, tune_cache=str(tune))
        assert "does not apply to @gemm_37x91x53_f16_f16_f32" in capfd.readouterr().err


def test_sparsity_error_of_a_served_kernel(folder):
    [k] = tilemma.compile(str(gemm_module(GemmSpec(16, 8, 32, "f16", "f16", "f32", sparse_a=True))))
    [again] = tilemma.compile(str(gemm_module(GemmSpec(16, 8, 32, "f16", "f16", "f32", sparse_a=True))))
    assert not served([k]) and served([again])
    assert again.sparsity_error(3 * 8 + 5) == k.sparsity_error(3 * 8 + 5) and "row 3, group 5" in again.sparsity_error(29)


def test_compile_errors_are_not_cached(folder):
    bad = TEXT.replace("tile.tile<37x91xf32>", "tile.tile<37x91xf16>", 1)
    for _ in range(2):
        with pytest.raises(tilemma.CompileError):
            tilemma.compile(bad)
    with pytest.raises(TypeError, match="unknown option"):
        tilemma.compile(TEXT, warpz="2x2")
    assert files(folder) == []


# ----------------------------------------------------------------------------- untrusted entries


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "flipped", "format", "foreign", "types"])
def test_damaged_entry_is_a_miss_and_is_rewritten(folder, damage):
    [first] = tilemma.compile(TEXT)
    [entry] = files(folder)
    data = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "flipped":  # one byte of the PTX changed: the digest no longer matches
        at = data.index(b".entry")
        entry.write_bytes(data[:at] + b"X" + data[at + 1:])
    elif damage == "format":
        entry.write_bytes(data.replace(b'"format": 1', b'"format": 99', 1))
    elif damage == "foreign":  # another key's entry under this key's name
        [other] = tilemma.compile(TEXT, stages=0)
        other_entry = next(p for p in files(folder) if p != entry)
        entry.write_bytes(other_entry.read_bytes())
    elif damage == "types":  # whole and digest-correct, but not what a compile entry holds
        rewrite(entry, lambda body: body["kernels"][0]["abi"].__setitem__("grid", ["2", 1, 1]))
    [k] = tilemma.compile(TEXT)
    assert not served([k]) and k.ptx == first.ptx and k.grid == first.grid
    assert cache.load("compile", entry.name.split(".")[0]) is not None  # written anew
    [again] = tilemma.compile(TEXT)
    assert served([again]) and again.ptx == first.ptx


def test_payload_checks_refuse_wrong_shapes(folder):
    tilemma.compile(TEXT)
    [entry] = files(folder)
    key = entry.name.split(".")[0]
    source = (TEXT, "90", {})
    assert cache.load_compile(key, source) is not None
    good = cache.compile_payload([k.compiled for k in tilemma.compile(TEXT, cache=False)], "")
    for change in (lambda b: b.__setitem__("modules", [1]),
                   lambda b: b["kernels"][0].__setitem__("module", 5),
                   lambda b: b["kernels"][0].__setitem__("name", "other"),
                   lambda b: b.__setitem__("kernels", []),
                   lambda b: b["kernels"][0]["abi"]["params"][0].__setitem__("shape", "37x53"),
                   lambda b: b["kernels"][0]["abi"].__setitem__("shared_bytes", None),
                   lambda b: b.__setitem__("notes", None)):
        cache.store("compile", key, good, "k")
        assert cache.load_compile(key, source) is not None
        rewrite(entry, change)
        assert cache.load_compile(key, source) is None


# ------------------------------------------------------------------------------ concurrency


def test_processes_compiling_at_once_share_one_whole_entry(folder, tmp_path):
    source = tmp_path / "g.mlir"
    source.write_text(TEXT)
    script = (f"import tilemma; [k] = tilemma.compile(open({str(source)!r}).read()); "
              "print(type(k.compiled).__name__, len(k.ptx))")
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    [k] = tilemma.compile(TEXT)
    assert served([k]) and {out.split()[1] for out, _ in outs} == {str(len(k.ptx))}
    assert len(files(folder)) == 1
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []  # no temporary files left


# ------------------------------------------------------------------------------ turned off


def test_empty_cache_dir_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEMMA_CACHE_DIR", "")
    assert cache.directory() is None
    monkeypatch.chdir(tmp_path)
    kernels = [tilemma.compile(TEXT)[0] for _ in range(2)]
    assert not served(kernels) and list(tmp_path.iterdir()) == []


def test_cache_false_leaves_the_cache_alone(folder):
    tilemma.compile(TEXT)
    [k] = tilemma.compile(TEXT, cache=False)
    assert not served([k])
    tilemma.compile(TEXT, stages=0, cache=False)
    assert len(files(folder)) == 1


def test_default_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TILEMMA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == str(tmp_path / "xdg" / "tilemma")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == str(tmp_path / "home" / ".cache" / "tilemma")


def test_unwritable_cache_is_a_note_not_an_error(tmp_path, monkeypatch, capfd):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TILEMMA_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    monkeypatch.setattr(cache, "_warned", set())
    [k] = tilemma.compile(TEXT)
    [again] = tilemma.compile(TEXT)
    err = capfd.readouterr().err
    assert k.ptx == again.ptx and err.count("tilemma: note: compile cache") == 1 and "not written" in err


def test_version_key_is_the_installed_version_and_the_sources():
    from importlib.metadata import version

    from tilemma.compiler.core import version as v

    assert v.version() == version("tilemma") == tilemma.__version__
    assert v.tilemma_key() == f"{version('tilemma')}+{v.source_digest()}" and len(v.source_digest()) == 64
    assert {os.path.basename(f) for f in v.source_folders()} >= {"compiler", "dialects", "passes"}


# -------------------------------------------------------------------------------------- CLI


def tilemma_cli(*args, cwd, env_folder, check=True):
    """`tilemma ARGS` in `cwd` with TILEMMA_CACHE_DIR=`env_folder`, run in this process
    (tests.inprocess: a process costs ~0.7 s of imports; test_processes_compiling_at_once_share_one_whole_entry
    is the one about processes)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILEMMA_CACHE_DIR", str(env_folder))
        mp.delenv("TILEMMA_TUNE_CACHE", raising=False)
        mp.chdir(cwd)
        proc = run_main("tilemma", cli.main, args)
    if check:
        assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_cli_compile_is_served_from_the_cache_and_shares_entries_with_the_api(tmp_path, folder):
    (tmp_path / "g.mlir").write_text(TEXT)
    tilemma_cli("compile", "g.mlir", "-o", "g.ptx", cwd=tmp_path, env_folder=folder)
    [entry] = files(folder)
    [k] = tilemma.compile(TEXT)  # the API's default options are the CLI's: the same entry
    assert served([k]) and (tmp_path / "g.ptx").read_text() == k.ptx
    rewrite(entry, lambda body: body["modules"].__setitem__(0, body["modules"][0] + "// served\n"))
    tilemma_cli("compile", "g.mlir", "-o", "again.ptx", cwd=tmp_path, env_folder=folder)
    assert (tmp_path / "again.ptx").read_text().endswith("// served\n")
    json_out = tilemma_cli("compile", "g.mlir", "--emit", "json", cwd=tmp_path, env_folder=folder).stdout
    assert json.loads(json_out)["kernels"] == [k.abi.to_dict()]
    # timed passes are of a compile that runs
    timed = tilemma_cli("compile", "g.mlir", "--time-passes", "-o", "t.ptx", cwd=tmp_path, env_folder=folder)
    assert "Pass execution timing report" in timed.stderr and "// served" not in (tmp_path / "t.ptx").read_text()
    tilemma_cli("compile", "g.mlir", "--stages", "0", "-o", "s0.ptx", cwd=tmp_path, env_folder=folder)
    assert len(files(folder)) == 2


def test_cli_errors_still_located_with_the_cache(tmp_path, folder):
    (tmp_path / "bad.mlir").write_text("func.func @k() {\n  %t = tile.frob\n}\n")
    for _ in range(2):
        proc = tilemma_cli("compile", "bad.mlir", cwd=tmp_path, env_folder=folder, check=False)
        assert proc.returncode == 1 and proc.stderr.startswith("bad.mlir:3:1: error: Operation tile.frob")
    assert files(folder) == []


@pytest.mark.skipif(find_ptxas() is None, reason="assembles with ptxas; not on PATH")
def test_cubins_are_cached_by_assembler_version(tmp_path, folder, monkeypatch):
    from tilemma.compiler.runtime import ptxas

    [k] = tilemma.compile(TEXT)
    cubin = k.cubin()
    assert cubin[:4] == b"\x7fELF" and len(files(folder, "cubin")) == 1
    with monkeypatch.context() as m:
        m.setattr(ptxas, "assemble", lambda *a, **kw: pytest.fail("assembled again"))
        assert tilemma.compile(TEXT)[0].cubin() == cubin
    (tmp_path / "g.mlir").write_text(TEXT)
    tilemma_cli("compile", "g.mlir", "--emit", "cubin", "-o", "g.cubin", cwd=tmp_path, env_folder=folder)
    assert (tmp_path / "g.cubin").read_bytes() == cubin and len(files(folder, "cubin")) == 1
    monkeypatch.setattr(ptxas, "assembler_version", lambda name: "ptxas 99.9")  # another assembler: a miss
    assert tilemma.compile(TEXT)[0].cubin() == cubin and len(files(folder, "cubin")) == 2


def test_cache_list_and_clear(tmp_path, folder):
    tilemma.compile(TEXT)
    tilemma.compile(TEXT, stages=0)
    (folder / ".x.compile.123.tmp").write_bytes(b"left by a killed writer")
    (folder / "notes.txt").write_text("not ours")
    (folder / ("0" * 64 + ".compile")).write_bytes(b"garbage")
    listing = tilemma_cli("cache", "list", cwd=tmp_path, env_folder=folder).stdout
    lines = listing.splitlines()
    assert lines[0].startswith(f"{folder}: 3 entries, ")
    assert sum("gemm_37x91x53_f16_f16_f32 (sm_90)" in line and " compile " in line for line in lines) == 2
    assert any("not a whole entry" in line for line in lines) and " ago " in lines[1]
    cleared = tilemma_cli("cache", "clear", cwd=tmp_path, env_folder=folder).stdout
    assert cleared.startswith(f"{folder}: removed 4 entries")
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert tilemma_cli("cache", "list", cwd=tmp_path, env_folder=folder).stdout.startswith(f"{folder}: 0 entries")
    off = tilemma_cli("cache", "list", cwd=tmp_path, env_folder="").stdout
    assert "off" in off
    missing = tilemma_cli("cache", "clear", cwd=tmp_path, env_folder=tmp_path / "none").stdout
    assert "removed 0 entries" in missing


def test_readme_torch_example_is_python_and_its_names_exist():
    """It runs on the GPU (tests/gpu/test_launch_torch_gpu.py); here: it parses, and what it
    calls is there."""
    import ast

    text = (Path(__file__).parents[1] / "README.md").read_text()
    example = text.split("### torch", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    ast.parse(example)
    assert "tilemma.torch.custom_op(kernel" in example
    source = (Path(__file__).parents[1] / "tilemma_pkg" / "torch.py").read_text()
    assert "def custom_op(kernel" in source and hasattr(tilemma.Kernel, "launch_unchecked")
