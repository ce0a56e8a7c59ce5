"""Every parser of outside text `doctor check` uses, fuzzed with hypothesis: whatever the bytes,
a parser returns a value or raises the one documented error; `check` never exits 3.
Seeds are real inputs (a real ELF file, real version files, a real policy)."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from doctor.errors import UsageError
from doctor.policy import _parse_toml, parse_policy
from doctor.probe import elf, nvidia, rocm, system, toolchain, versions
from doctor.probe.ldcache import parse_ld_so_cache

FUZZ = settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
HUGE = "9" * 5000  # past Python's int() digit limit: a ValueError where a parser calls int()


# -- ELF headers --


@pytest.fixture(scope="module")
def real_elf(abi_libs) -> bytes:
    return abi_libs["cxx11"].read_bytes()


@FUZZ
@given(data=st.data())
def test_check_fuzz_elf_header_mutations(tmp_path, real_elf, data):
    """Flip bytes of a real header (class, byte order, offsets, counts) or cut the file: read_elf
    answers or raises ElfProblem / pyelftools' ELFError — the libtorch probe turns both into a
    finding — and never hangs or eats memory."""
    from elftools.common.exceptions import ELFError, ELFParseError

    blob = bytearray(real_elf)
    for _ in range(data.draw(st.integers(0, 6))):
        at = data.draw(st.integers(0, 63))
        blob[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    blob = bytes(blob[:cut])
    problem = elf.header_problem(blob[:64], len(blob))
    assert problem is None or isinstance(problem, str)
    path = tmp_path / "libc10.so"
    path.write_bytes(blob)
    elf._read_elf.cache_clear()
    try:
        info = elf.read_elf(str(path), str(path), count_abi_symbols=True)
    except (elf.ElfProblem, ELFError, ELFParseError, struct.error, ValueError, KeyError, IndexError, OSError):
        return  # each caught by the probe (`except Exception`) and reported as a broken library
    assert info.elfclass in (32, 64)


@FUZZ
@given(head=st.binary(max_size=80), size=st.integers(0, 1 << 40))
@example(head=b"", size=0)
@example(head=b"\x7fELF\x02\x01", size=6)
def test_check_fuzz_elf_header_problem_is_total(head, size):
    result = elf.header_problem(head, size)
    assert result is None or isinstance(result, str)
    if result is None:
        assert elf.identity(head) in ((32, "little"), (32, "big"), (64, "little"), (64, "big"))


# -- version files --


@FUZZ
@given(text=st.text(max_size=400))
@example(text="__version__ = '2.13.0+cpu'\ncuda = None\n")
@example(text="x = " + "(" * 5000 + ")" * 5000)
@example(text="__version__ = '1'\0")
@example(text=f"#define TORCH_VERSION_MAJOR {HUGE}\n#define TORCH_VERSION_MINOR 1\n#define TORCH_VERSION_PATCH 0\n")
@example(text=f"{HUGE}.0.0+cpu")
@example(text='set(PACKAGE_VERSION "2.13.0abc")')
def test_check_fuzz_version_files(text):
    py = versions.parse_version_py(text)
    assert isinstance(py, dict)
    for parsed in (versions.parse_version_h(text), versions.parse_config_version_cmake(text),
                   versions.parse_build_version(text), py.get("__version__")):
        if isinstance(parsed, str):
            release = versions.pep440_release(parsed)
            assert release is None or all(p.isdigit() and len(p) <= 7 for p in release.split("."))
    cfg = versions.parse_torch_config_cmake(text)
    assert cfg["abi_flag"] in (None, "0", "1")
    assert isinstance(versions.parse_os_release(text), dict)
    assert versions.split_local(text)[0] is not None


# -- policy files --


POLICY_KEYS = st.sampled_from(["require", "error-on", "ignore", "min-version", "requires", "x"])
toml_scalars = st.text(max_size=30) | st.integers() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
toml_values = st.recursive(toml_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=20), c, max_size=3),
                           max_leaves=12)


@FUZZ
@given(table=st.dictionaries(POLICY_KEYS, toml_values, max_size=4))
@example(table={"require": ["libtorch>=2.5"], "error-on": ["abi.mismatch"], "ignore": {"disk.low": "ok"}})
@example(table={"error-on": ["abi.mismatchh"]})
@example(table={"min-version": HUGE})
def test_check_fuzz_policy_tables(table):
    try:
        parse_policy(table, "doctor.toml")
    except UsageError as exc:
        assert exc.exit_code == 2 and exc.message.startswith("doctor.toml: ")


@FUZZ
@given(text=st.text(max_size=300))
@example(text="require = " + "[" * 2000 + "]" * 2000)
@example(text="a" + ".a" * 2000 + " = 1")
@example(text=f"x = {HUGE}")
@example(text='x = """\nunterminated')
def test_check_fuzz_policy_text(text):
    try:
        table = _parse_toml(text, "doctor.toml")
        parse_policy(table, "doctor.toml")
    except UsageError as exc:
        assert exc.exit_code == 2


# -- other text `check` reads: ld.so.cache, /proc, compilers --


@FUZZ
@given(data=st.binary(max_size=400))
@example(data=b"glibc-ld.so.cache1.1" + b"\xff" * 40)
def test_check_fuzz_ld_so_cache(data):
    assert isinstance(parse_ld_so_cache(data), dict)


@FUZZ
@given(text=st.text(max_size=400))
@example(text=f"MemTotal: {HUGE} kB\n")
def test_check_fuzz_proc_and_compiler_text(text):
    system.parse_cpuinfo(text)
    system.parse_meminfo(text)
    system.newest_symbol_versions(text.encode("utf-8", "surrogatepass"))
    toolchain.parse_compiler_version(text)
    toolchain.parse_cmake_version(text)
    toolchain.parse_nvcc_version(text)
    toolchain.parse_flags(text)


# -- GPU tool output (fuzz only: the GPU probes are another area's) --


@FUZZ
@given(text=st.text(max_size=400), count=st.integers(0, 16))
@example(text="0, NVIDIA H200, 550.144.03, 9.0, 143771, 1, 00000000:19:00.0\n", count=1)
@example(text=json.dumps({"event": "cuda", "rc": HUGE}), count=1)
@example(text=f"{HUGE}", count=2)
def test_check_fuzz_nvidia_smi_and_friends(text, count):
    nvidia.parse_module_version(text)
    nvidia.parse_proc_version(text)
    nvidia.parse_proc_gpu_information(text)
    assert isinstance(nvidia.parse_smi_csv(text), list)
    nvidia.parse_child_output(text)
    nvidia.parse_visible_devices(text, count)
    try:
        nvidia.parse_override(text)
    except ValueError:  # its documented answer to anything but a version; the probe reports it
        pass


@FUZZ
@given(text=st.text(max_size=400))
@example(text=f"gfx_target_version {HUGE}\n")
@example(text="gfx_target_version 90402\nsimd_count 304\n")
def test_check_fuzz_rocminfo_and_kfd(text):
    props = rocm.parse_kfd_properties(text)
    for value in props.values():
        rocm.gfx_name(value)
    rocm.parse_rocm_version(text)
    rocm.gfx_targets_in_names(text.split())


# -- requirements (--require and the policy's require) --


@FUZZ
@given(text=st.text(max_size=60) | st.from_regex(r"(lib)?torch ?[<>=!~]{1,3} ?[0-9a-z.+*]{0,20}", fullmatch=True))
@example(text="torch==" + HUGE)
@example(text="torch==2.13.0+cpu")
def test_check_fuzz_requirements(text):
    from types import SimpleNamespace

    from doctor.requirements import evaluate, parse_requirement

    try:
        req = parse_requirement(text)
    except UsageError as exc:
        assert exc.exit_code == 2
        return
    if req.kind in ("libtorch", "torch"):
        facts = {"libtorch": SimpleNamespace(active_install=None),
                 "python_torch": SimpleNamespace(version="2.13.0+cpu", base_version="2.13.0", evidence=[])}
        finding = evaluate(req, facts)
        assert finding is None or finding.id == "requirement.unmet"


# -- the environment itself is outside text --

ENV_NAMES = ["LIBTORCH", "LIBTORCH_LIB", "LIBTORCH_INCLUDE", "LIBTORCH_HOME", "LIBTORCH_VERSION", "Torch_DIR",
             "CMAKE_PREFIX_PATH", "CONDA_PREFIX", "LD_LIBRARY_PATH", "CXX", "CXXFLAGS", "CPPFLAGS", "XDG_CACHE_HOME",
             "HOME", "CUDA_VISIBLE_DEVICES"]
env_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["/", "x" * 300, "/opt/" + "y" * 300 + "/libtorch", "a:b::c", "share/cmake/Torch", "'", "\x00", "..", "~"])


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=st.dictionaries(st.sampled_from(ENV_NAMES), env_text, max_size=6))
def test_check_fuzz_environment_never_crashes(tmp_path, env):
    from doctor.check import run_check
    from doctor.host import Host

    report = run_check(Host.for_test(tmp_path, env=env))
    assert report.exit_code() in (0, 1)
