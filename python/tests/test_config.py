"""Misconfiguration is loud: each case runs in a fresh Python (a process loads the libraries
once) with one setting wrong, and must end with an error or warning that names the paths."""

import os
import subprocess
import sys

import pytest

import ggml_rs as g

ENV_KEYS = ("GGML_RS_LIB_DIR", "GGML_RS_LIBRARY", "GGML_RS_CPU_LIBRARY")


def run(code, cwd=None, **env):
    """Runs `code` in a new Python with the test's environment changed by `env` (None: unset)."""
    e = dict(os.environ)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-W", "always", "-c", "import ggml_rs as g\n" + code], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=120)


def settings():
    info = g.library_info()
    return info["lib_dir"], info["library"], info["cpu_library"]


def test_library_info_of_this_process():
    info = g.library_info()
    assert info["is_ggml_rs"] and info["version"].startswith("ggml-rs ")
    assert os.path.isabs(info["ggml_rs"]) and os.path.isfile(info["ggml_rs"])
    # the allocator in use is ggml-rs's: the file that defines ggml_gallocr_new_n is libggml_rs
    assert info["allocator"] == info["ggml_rs"]
    for key in ("lib_dir", "library", "cpu_library"):
        assert info[key] is None or os.path.isabs(info[key]), (key, info[key])


def test_relative_paths_are_made_absolute_once(tmp_path):
    lib_dir, library, _ = settings()
    if lib_dir is None:
        pytest.skip("GGML_RS_LIB_DIR is not set")
    rel = os.path.relpath(lib_dir, tmp_path)
    p = run("import os\ng.load()\nos.chdir('/')\ni = g.library_info()\nprint(i['lib_dir'])", cwd=tmp_path,
            GGML_RS_LIB_DIR=rel)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == lib_dir


def test_a_missing_lib_dir_is_named(tmp_path):
    p = run("g.load()", GGML_RS_LIB_DIR=str(tmp_path / "nowhere"))
    assert p.returncode != 0 and f"GGML_RS_LIB_DIR (or lib_dir) is {tmp_path / 'nowhere'}, which is not a folder" in p.stderr


def test_an_empty_lib_dir_names_every_path_tried(tmp_path):
    _, library, _ = settings()
    p = run("g.load()", GGML_RS_LIB_DIR=str(tmp_path), GGML_RS_LIBRARY=library)
    assert p.returncode != 0
    for name in ("libggml-base.so", "libggml-base.so.0"):
        assert str(tmp_path / name) in p.stderr, p.stderr


def test_a_missing_library_is_named(tmp_path):
    p = run("g.load()", GGML_RS_LIBRARY=str(tmp_path / "libggml_rs.so"))
    assert p.returncode != 0 and f"GGML_RS_LIBRARY (or library) is {tmp_path / 'libggml_rs.so'}, which is not a file" in p.stderr


def _stock_dir():
    stock = os.environ.get("GGML_RS_STOCK_LIB_DIR")
    lib_dir = settings()[0]
    if stock is None and lib_dir is not None:
        # the suite's layout: .upstream/<llama-cpp-python>/build-ours/bin beside build-stock/bin
        stock = os.path.join(os.path.dirname(os.path.dirname(lib_dir)), "build-stock", "bin")
    if stock is None or not os.path.isfile(os.path.join(stock, "libggml-base.so")):
        pytest.skip(f"no stock ggml build ({stock}): set GGML_RS_STOCK_LIB_DIR")
    return stock


def test_stock_ggml_warns_and_says_so():
    p = run("i = g.library_info()\nprint(i['is_ggml_rs'], i['version'], i['allocator'])",
            GGML_RS_LIB_DIR=_stock_dir(), GGML_RS_LIBRARY=None, LD_PRELOAD=None)
    assert p.returncode == 0, p.stderr
    assert "LoadWarning" in p.stderr and "is stock ggml, not ggml-rs" in p.stderr, p.stderr
    is_rs, version, allocator = p.stdout.split()
    assert (is_rs, version) == ("False", "None") and os.path.basename(allocator).startswith("libggml-base"), p.stdout


def test_rust_cpu_names_where_it_looked(tmp_path):
    _, library, _ = settings()
    if library is None:
        pytest.skip("GGML_RS_LIBRARY is not set")
    # a libggml_rs with no libggml_rs_cpu.so beside it
    os.symlink(library, tmp_path / "libggml_rs.so")
    code = "try:\n    g.Backend.rust_cpu()\nexcept g.GgmlError as e:\n    print(e)"
    p = run(code, GGML_RS_LIBRARY=str(tmp_path / "libggml_rs.so"), GGML_RS_CPU_LIBRARY=None)
    assert p.returncode == 0, p.stderr
    assert f"not at {tmp_path / 'libggml_rs_cpu.so'} (beside {tmp_path / 'libggml_rs.so'}" in p.stdout, p.stdout
    assert "GGML_RS_CPU_LIBRARY" in p.stdout
    p = run(code, GGML_RS_CPU_LIBRARY="nowhere/libggml_rs_cpu.so", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"not at {tmp_path / 'nowhere' / 'libggml_rs_cpu.so'} (GGML_RS_CPU_LIBRARY)" in p.stdout, p.stdout
