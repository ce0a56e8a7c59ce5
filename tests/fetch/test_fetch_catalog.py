"""The release table: one test per row, and each naming trap spelled out with a real file name."""

from __future__ import annotations

import pytest

from doctor.catalog import releases
from doctor.catalog.releases import CatalogError, file_name, parse_file_name, resolve

# Each row of shared/reference/libtorch-releases.md ("Variants published per release"),
# written out again by hand so that a typo in the table fails here.
ROWS = {
    "1.13": ("cu116 cu117", "rocm5.1.1 rocm5.2"),
    "2.0": ("cu117 cu118", "rocm5.3 rocm5.4.2"),
    "2.1": ("cu118 cu121", "rocm5.5 rocm5.6"),
    "2.2": ("cu118 cu121", "rocm5.6 rocm5.7"),
    "2.3": ("cu118 cu121", "rocm5.7 rocm6.0"),
    "2.4": ("cu118 cu121 cu124", "rocm6.0 rocm6.1"),
    "2.5": ("cu118 cu121 cu124", "rocm6.1 rocm6.2"),
    "2.6": ("cu118 cu124 cu126", "rocm6.1 rocm6.2.4"),
    "2.7": ("cu118 cu126 cu128", "rocm6.2.4 rocm6.3"),
    "2.8": ("cu126 cu128 cu129", "rocm6.3 rocm6.4"),
    "2.9": ("cu126 cu128 cu130", "rocm6.3 rocm6.4"),
    "2.10": ("cu126 cu128 cu130", "rocm7.0 rocm7.1"),
    "2.11": ("cu126 cu128 cu130", "rocm7.1 rocm7.2"),
    "2.12": ("cu126 cu130 cu132", "rocm7.1 rocm7.2"),
    "2.13": ("cu126 cu130 cu132", "rocm7.1 rocm7.2"),
}


def test_the_table_has_exactly_the_reference_rows():
    assert [s.series for s in releases.SERIES] == list(ROWS)


@pytest.mark.parametrize("series", list(ROWS))
def test_row(series):
    cuda, rocm = ROWS[series][0].split(), ROWS[series][1].split()
    row = releases.series_of(series + ".0")
    assert row is not None and row.series == series
    for version in row.versions:
        assert version.startswith(series + ".")
        linux = releases.variants(version, "linux-x86_64")
        assert linux == ["cpu", *cuda, *rocm]
        windows = releases.variants(version, "windows-x86_64")
        assert windows == ["cpu", *(c for c in cuda if c != "cu129")]
        # every published Linux variant resolves to a URL under its own folder, '+' as %2B
        for variant in linux:
            art = resolve(version, variant, "linux-x86_64")
            assert art.url.startswith(f"https://download.pytorch.org/libtorch/{variant}/libtorch-")
            assert art.url.endswith(f"-{version}%2B{variant}.zip") and "+" not in art.url
            assert art.file_name.endswith(f"-{version}+{variant}.zip")
            assert art.abi == "cxx11"
        for variant in windows:
            art = resolve(version, variant, "windows-x86_64")
            assert art.file_name == f"libtorch-win-shared-with-deps-{version}+{variant}.zip"
            assert art.abi is None
        # a variant from another row is refused, naming what exists
        stranger = "cu101"
        with pytest.raises(CatalogError, match=rf"no {stranger} build .* published: cpu, {cuda[0]}"):
            resolve(version, stranger, "linux-x86_64")


# -- the traps --


@pytest.mark.parametrize("version, abi, expected", [
    # up to 2.6 the plain name is the OLD ABI and the CXX11 build says so in its name
    ("2.6.0", "pre-cxx11", "libtorch-shared-with-deps-2.6.0+cpu.zip"),
    ("2.6.0", "cxx11", "libtorch-cxx11-abi-shared-with-deps-2.6.0+cpu.zip"),
    ("1.13.1", "pre-cxx11", "libtorch-shared-with-deps-1.13.1+cpu.zip"),
    # 2.7: CXX11 only, still under the cxx11-abi name
    ("2.7.1", "cxx11", "libtorch-cxx11-abi-shared-with-deps-2.7.1+cpu.zip"),
    # from 2.8 the plain name means CXX11
    ("2.8.0", "cxx11", "libtorch-shared-with-deps-2.8.0+cpu.zip"),
    ("2.13.0", "cxx11", "libtorch-shared-with-deps-2.13.0+cpu.zip"),
])
def test_linux_names_by_version_and_abi(version, abi, expected):
    assert resolve(version, "cpu", "linux-x86_64", abi).file_name == expected


@pytest.mark.parametrize("version", ["2.7.0", "2.8.0", "2.13.0"])
def test_pre_cxx11_only_up_to_2_6(version):
    with pytest.raises(CatalogError, match="CXX11 ABI only"):
        resolve(version, "cpu", "linux-x86_64", "pre-cxx11")


def test_same_name_different_abi_is_read_back_by_version():
    assert parse_file_name("libtorch-shared-with-deps-2.6.0%2Bcu124.zip").abi == "pre-cxx11"
    assert parse_file_name("libtorch-shared-with-deps-2.8.0%2Bcu128.zip").abi == "cxx11"
    assert parse_file_name("libtorch-cxx11-abi-shared-with-deps-2.7.1+cu118.zip").abi == "cxx11"


@pytest.mark.parametrize("version, platform, expected", [
    ("2.1.2", "macos-x86_64", "libtorch-macos-2.1.2.zip"),
    ("2.2.2", "macos-x86_64", "libtorch-macos-x86_64-2.2.2.zip"),
    ("2.2.2", "macos-arm64", "libtorch-macos-arm64-2.2.2.zip"),
    ("2.13.0", "macos-arm64", "libtorch-macos-arm64-2.13.0.zip"),
])
def test_macos_names(version, platform, expected):
    art = resolve(version, "cpu", platform)
    assert art.file_name == expected
    assert art.url == f"https://download.pytorch.org/libtorch/cpu/{expected}"  # no %2B suffix, always cpu/
    assert art.abi is None
    assert parse_file_name(expected).platform == platform


@pytest.mark.parametrize("version, platform", [("2.3.0", "macos-x86_64"), ("2.13.0", "macos-x86_64"),
                                               ("2.1.0", "macos-arm64")])
def test_macos_arch_not_published(version, platform):
    with pytest.raises(CatalogError, match=f"no libtorch {version} zip for {platform}"):
        resolve(version, "cpu", platform)


def test_macos_has_no_cuda():
    with pytest.raises(CatalogError, match="CPU-only"):
        resolve("2.13.0", "cu130", "macos-arm64")


def test_windows_debug_and_release():
    assert resolve("2.13.0", "cu130", "windows-x86_64", debug=True).file_name == \
        "libtorch-win-shared-with-deps-debug-2.13.0+cu130.zip"
    assert parse_file_name("libtorch-win-shared-with-deps-debug-2.13.0%2Bcu130.zip").debug is True
    with pytest.raises(CatalogError, match="only for Windows"):
        resolve("2.13.0", "cpu", "linux-x86_64", debug=True)


def test_windows_never_had_cu129_nor_rocm():
    assert resolve("2.8.0", "cu129", "linux-x86_64").file_name == "libtorch-shared-with-deps-2.8.0+cu129.zip"
    with pytest.raises(CatalogError, match="no cu129 build for windows-x86_64"):
        resolve("2.8.0", "cu129", "windows-x86_64")
    with pytest.raises(CatalogError, match="no ROCm"):
        resolve("2.13.0", "rocm7.2", "windows-x86_64")


def test_no_linux_aarch64_zip():
    with pytest.raises(CatalogError, match="--from-wheel"):
        resolve("2.13.0", "cpu", "linux-aarch64")
    assert releases.variants("2.13.0", "linux-aarch64") == []


def test_variant_not_published_for_that_release():
    with pytest.raises(CatalogError, match="libtorch 2.13.0 has no cu128 build"):
        resolve("2.13.0", "cu128", "linux-x86_64")
    with pytest.raises(CatalogError, match="libtorch 2.6.0 has no rocm6.3 build"):
        resolve("2.6.0", "rocm6.3", "linux-x86_64")


def test_unknown_version_lists_what_is_known_and_unlisted_goes_beyond():
    with pytest.raises(CatalogError) as err:
        resolve("2.14.0", "cpu", "linux-x86_64")
    assert "2.13.x (0)" in err.value.message and "1.13.x (0, 1)" in err.value.message
    assert "--unlisted" in err.value.hint
    art = resolve("2.14.0", "cu140", "linux-x86_64", listed=False)
    assert art.file_name == "libtorch-shared-with-deps-2.14.0+cu140.zip" and not art.listed


@pytest.mark.parametrize("bad", ["gpu", "cuda", "cu1", "rocm", "CPU"])
def test_bad_variant_forms(bad):
    with pytest.raises(CatalogError, match="not a libtorch variant"):
        resolve("2.13.0", bad, "linux-x86_64")


def test_mirror_and_channels():
    assert resolve("2.13.0", "cpu", "linux-x86_64", base="https://m.example/lt/").url == \
        "https://m.example/lt/cpu/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"
    assert resolve("2.14.0", "cpu", "linux-x86_64", channel="test").url == \
        "https://download.pytorch.org/libtorch/test/cpu/libtorch-shared-with-deps-2.14.0%2Bcpu.zip"
    nightly = resolve(None, "cu130", "linux-x86_64", channel="nightly")
    assert nightly.url == "https://download.pytorch.org/libtorch/nightly/cu130/libtorch-shared-with-deps-latest.zip"
    assert nightly.version is None
    assert resolve(None, "cpu", "macos-arm64", channel="nightly").file_name == "libtorch-macos-arm64-latest.zip"


def test_versions_are_ordered_numerically():
    vs = releases.versions()
    assert vs[0] == "1.13.0" and vs[-1] == "2.13.0" == releases.newest_version()
    assert vs.index("2.9.1") < vs.index("2.10.0")  # not string order


@pytest.mark.parametrize("system, machine, expected", [
    ("Linux", "x86_64", "linux-x86_64"), ("Linux", "aarch64", "linux-aarch64"),
    ("Darwin", "arm64", "macos-arm64"), ("Darwin", "x86_64", "macos-x86_64"),
    ("Windows", "AMD64", "windows-x86_64"), ("Linux", "ppc64le", None), ("FreeBSD", "amd64", None),
])
def test_host_platform(system, machine, expected):
    assert releases.host_platform(system, machine) == expected


def test_file_name_round_trip_over_the_whole_table():
    for version in releases.versions():
        for platform in ("linux-x86_64", "windows-x86_64", "macos-arm64", "macos-x86_64"):
            for variant in releases.variants(version, platform):
                for abi in releases.abis(version, platform):
                    name = file_name(version, variant, platform, abi)
                    facts = parse_file_name(name)
                    assert (facts.version, facts.variant, facts.platform, facts.abi) == (version, variant, platform, abi), name
