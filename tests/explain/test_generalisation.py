"""Issue 17: `doctor explain` on logs it was not written against, read as people paste them.

- the corpus: its size, its split (fixed by a hash of the source), and the holdout score, which
  must stay at or above the value recorded by hand in tests/fixtures/logs/holdout-score.json;
- normalisation: real corpus lines dressed as runners, trackers and terminals dress them give
  the same finding, at the original line numbers;
- wordings: each tool's words for a cause (the issue's list);
- look-alikes: facts decide cuda.not-compiled vs link.as-needed and the finding says which;
  a real GNU ld run shows "needed by … not found" as a link-path problem, not an ABI one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from doctor.explain import MachineFacts, explain_text
from doctor.explain.patterns import RULES
from doctor.probe.libtorch import LibtorchInstall

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "tests/fixtures/logs"
INDEX = json.loads((LOGS / "index.json").read_text(encoding="utf-8"))["logs"]
# ids the public record has fewer than five logs for (listed, so a new one cannot slip in unseen)
THIN = {"cmake.torch-library-missing", "link.as-needed", "link.library-missing",
        # issue 14's macOS/Windows ids came with 3-4 public logs each (that issue asks for 3)
        "macos.min-version", "windows.crt-mismatch", "windows.vc-runtime-missing",
        # issue 15 asks for 3; about 30 searches of public issues, pages and code found 2 (see the stop's closing note)
        "dist.version-mismatch",
        # musl (Alpine): torch does not install there, so few public logs exist; 3 found
        "glibc.missing",
        # a noexec mount or `ulimit -v` under torch: 3 public logs found (others are of other programs)
        "loader.map-failed",
        # tch-rs's own words since torch-sys 0.14 (older ones downloaded libtorch instead): 2 public logs found
        "libtorch.not-found"}


def score(split: str) -> tuple[float, list[str]]:
    """(share of `split` logs whose first finding is the expected root cause, or none for a
    clean log; the misses), explained from the log alone plus what its thread says (`facts`)."""
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("score_explain", str(REPO / "scripts/score-explain"))
    script = importlib.util.module_from_spec(importlib.util.spec_from_loader("score_explain", loader))
    loader.exec_module(script)
    s = script.score([e for e in INDEX if e["split"] == split])
    return s["accuracy"], [m["file"] for m in s["misses"]]


def ids(text: str | bytes, facts: MachineFacts | None = None) -> list[str]:
    return [f.id for f in explain_text(text, facts)]


def line(file: str, contains: str) -> str:
    return next(ln for ln in (LOGS / file).read_text(encoding="utf-8").splitlines() if contains in ln)


# -- the corpus and its split --


def test_corpus_has_200_public_logs_five_per_id_and_20_clean_ones():
    public = [e for e in INDEX if e["kind"] == "public"]
    assert len(public) >= 200
    per_id = Counter(i for e in public for i in e["ids"])
    thin = {i for i in RULES if per_id[i] < 5}
    assert thin == THIN, f"ids with fewer than 5 public logs: {sorted(thin)}"
    assert sum(not e["ids"] for e in public) >= 20
    for e in public:
        assert e["source"].startswith("https://github.com/") and e.get("split") in ("dev", "holdout"), e


def test_split_is_the_fixed_hash_of_the_source():
    for e in INDEX:
        holdout = int(hashlib.sha256(e["source"].encode()).hexdigest(), 16) % 3 == 0
        assert e["split"] == ("holdout" if holdout else "dev"), e["file"]
    sources = {e["source"] for e in INDEX}
    held = {s for s in sources if int(hashlib.sha256(s.encode()).hexdigest(), 16) % 3 == 0}
    assert 0.25 < len(held) / len(sources) < 0.42  # about a third of the sources


def test_index_page_is_generated_from_the_index():
    out = subprocess.run([str(REPO / "scripts/corpus-index"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_findings_pages_show_wordings_deciding_facts_and_holdout_accuracy():
    out = subprocess.run([str(REPO / "scripts/findings-index"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for rule_id in RULES:
        page = (REPO / "docs/findings" / f"{rule_id}.md").read_text(encoding="utf-8")
        for part in ("**Wordings `doctor explain` reads**", "**Facts that decide it:**", "**Holdout accuracy:**"):
            assert part in page, (rule_id, part)


def test_holdout_score_stays_at_or_above_the_recorded_value():
    recorded = json.loads((LOGS / "holdout-score.json").read_text(encoding="utf-8"))
    accuracy, misses = score("holdout")
    assert accuracy >= recorded["accuracy"], f"holdout {accuracy:.1%} < recorded {recorded['accuracy']:.1%}: {misses}"
    assert recorded["accuracy"] >= 0.95


def test_no_finding_on_any_clean_log():
    for e in INDEX:
        if not e["ids"]:
            assert ids((LOGS / e["file"]).read_bytes()) == [], e["file"]


# -- normalisation: the same real line, dressed --

WATCHDOG = "nccl.watchdog-timeout--basicsr-737.log"
HEADER = "headers.missing--hasktorch-656.log"


@pytest.mark.parametrize("dress", [
    lambda ln: f"2024-05-01T10:11:12.1234567Z {ln}",  # GitHub Actions
    lambda ln: f"2024-05-01T10:11:12.123Z [rank3]: {ln}",  # CI + torchrun
    lambda ln: f"[default0]:{ln}",  # torchrun --tee
    lambda ln: f"#12 45.6 {ln}",  # Docker BuildKit
    lambda ln: f"> {ln}",  # a quoted paste
    lambda ln: f"> > {ln}",
    lambda ln: f"\x1b[1m\x1b[31m{ln}\x1b[0m",  # colour
    lambda ln: f"##[error]{ln}",
], ids=["ci-timestamp", "ci-and-rank", "default0", "buildkit", "quote", "nested-quote", "ansi", "gh-annotation"])
def test_runner_prefixes_and_colour_are_read_through(dress):
    for file, contains, want in ((WATCHDOG, "Watchdog caught", "nccl.watchdog-timeout"),
                                 (HEADER, "No such file", "headers.missing")):
        raw = line(file, contains)
        log = "first line\n" + dress(raw) + "\nlast line\n"
        found = explain_text(log, source="x")
        assert [f.id for f in found] == [want], (dress(raw), found)
        assert found[0].evidence[0].source == "x:2"


# CI runners' and tools' own prefixes on every line, each as its source writes it (doctor/explain/normalise.py)
CI_PREFIXES = {
    "jenkins-pipeline": "[2024-01-01T00:00:00.123Z] ",  # Timestamper plugin in a Pipeline build
    "jenkins-console": "12:34:56  ",  # Timestamper's console view, its default HH:mm:ss
    "jenkins-elapsed": "00:00:01.5 ",  # ... showing the elapsed time
    "gitlab": "2024-01-01T00:00:00.123456Z 00O ",  # GitLab Runner with FF_TIMESTAMPS
    "gitlab-stderr": "2024-01-01T00:00:00.123456Z 01E ",
    "compose": "svc  | ",  # docker compose up / logs
    "compose-v2": "myproject-web-1  | ",
    "tab": "\t",  # an indented paste or CI step
    "compose-and-tab": "trainer  | \t",
}


@pytest.mark.parametrize("prefix", CI_PREFIXES.values(), ids=CI_PREFIXES.keys())
def test_every_corpus_log_reads_the_same_behind_each_ci_prefix(prefix):
    for e in INDEX:
        data = (LOGS / e["file"]).read_bytes()
        dressed = b"".join(prefix.encode() + ln for ln in data.splitlines(keepends=True))
        assert ids(dressed) == ids(data), e["file"]


@pytest.mark.parametrize("prefix", CI_PREFIXES.values(), ids=CI_PREFIXES.keys())
@pytest.mark.parametrize("file", ["cuda.arch-unsupported--xinference-3603.log", "glibc.too-old--mlverse-torch-866.log"])
def test_ci_prefixes_on_every_line_are_read_through(file, prefix):
    """A sign anchored at the line start (the GPU name before "with CUDA capability", read up to
    a ':'), and R's message word-wrapped after a blank, read behind each prefix as without it."""
    data = (LOGS / file).read_bytes()
    dressed = b"".join(prefix.encode() + ln for ln in data.splitlines(keepends=True))
    want = file.split("--")[0]
    assert ids(data) == [want]
    assert ids(dressed) == [want], dressed[:200]


def test_typographic_quotes_match_like_ascii_ones():
    raw = line("version.mismatch--tch-rs-671.log", "is not a member of")  # gcc's own ‘…’
    assert "‘" in raw
    assert ids(raw) == ids(raw.replace("‘", "'").replace("’", "'")) == ["version.mismatch"]
    curly = line("cmake.torch-not-found--pytorch-44362.log", "FindTorch.cmake")  # “…” from a forum
    assert ids(curly) == ["cmake.torch-not-found"]


@pytest.mark.parametrize("eol", ["\r\n", "\r"], ids=["crlf", "cr-only"])
def test_line_ends_keep_line_numbers(eol):
    text = (LOGS / WATCHDOG).read_text(encoding="utf-8")
    lines = text.splitlines()
    want = next(n for n, ln in enumerate(lines, 1) if "Watchdog caught" in ln)
    (found,) = explain_text(eol.join(lines), source="x")
    assert found.evidence[0].source == f"x:{want}"


def test_a_path_wrapped_by_a_terminal_is_joined_and_keeps_its_first_line():
    # a real loader line, broken by an 80-column terminal inside the library name
    raw = line("loader.library-not-found--hasktorch-293.log", "cannot open shared object file")
    cut = raw.index("libc10.so") + 5
    log = "starting\n" + raw[:cut] + "\n" + raw[cut:] + "\n"
    (found,) = explain_text(log, source="x")
    assert found.id == "loader.library-not-found" and found.evidence[0].source == "x:2"
    assert "libc10.so" in found.detail


def test_a_windows_dll_message_broken_after_the_quote_is_joined():
    log = ('OSError: [WinError 126] The specified module could not be found. Error loading "\n'
           'C:\\Users\\me\\venv\\lib\\site-packages\\torch\\lib\\fbgemm.dll" or one of its dependencies.\n')
    (found,) = explain_text(log, source="x")
    assert found.id == "loader.library-not-found" and found.evidence[0].source == "x:1"


def test_a_message_word_wrapped_after_a_blank_is_joined():
    # a real loader line as R prints it (mlverse/torch#866): broken after "version `GLIBCXX_…' ",
    # so that no one line holds "' not found"
    (found,) = explain_text((LOGS / "glibc.too-old--mlverse-torch-866.log").read_text(), source="x")
    assert found.id == "glibc.too-old" and found.evidence[0].source == "x:2" and "GLIBCXX_3.4.20" in found.title
    # the same break after a line padded with blanks (a table, a progress display) is not a wrap
    raw = line("glibc.too-old--mlverse-torch-866.log", "GLIBCXX_3.4.20")
    assert ids(raw.rstrip() + "  \nnot found (required by /x/liblantern.so)\n") == []


def test_a_short_line_is_never_joined_to_its_neighbour():
    # "cannot open shared object file" alone names no library: joining "libc10.so" from a short
    # previous line would invent one
    assert ids("libc10.so\n: cannot open shared object file: No such file or directory\n") == []


def test_a_line_cut_off_mid_word_still_matches():
    assert ids("/src/x.cpp:1:10: fatal error: torch/torch.h: No such file or dire") == ["headers.missing"]
    assert ids(line("nccl.watchdog-timeout--llamafactory-8261.log", "Watchdog")) == ["nccl.watchdog-timeout"]


# -- wordings --


@pytest.mark.parametrize(("text", "want"), [
    ("/home/pi/libtorch/lib/libtorch.so: file not recognized: file format not recognized", "arch.mismatch"),
    ("/usr/bin/ld: /opt/libtorch/lib/libc10.so: error adding symbols: file in wrong format", "arch.mismatch"),
    ("ld.lld: error: /opt/libtorch/lib/libtorch_cpu.so is incompatible with aarch64linux", "arch.mismatch"),
    ("/usr/bin/ld.gold: error: /opt/libtorch/lib/libc10.so: incompatible target", "arch.mismatch"),
    ("ld: warning: ignoring file '/x/libtorch/lib/libc10.dylib': found architecture 'x86_64', required "
     "architecture 'arm64'", "arch.mismatch"),
    ("/usr/include/c++/4.8/bits/c++0x_warning.h:32:2: error: #error This file requires compiler and library "
     "support for the ISO C++ 2011 standard. This support is currently experimental", "cxx.std-too-old"),
    ("nvcc warning : The -std=c++17 flag is not supported with the configured host compiler. Flag will be ignored.",
     "cxx.std-too-old"),
    ("nvcc fatal   : Value 'c++17' is not defined for option 'std'", "cxx.std-too-old"),
    ("fatal error C1189: #error:  You need C++17 to compile PyTorch", "cxx.std-too-old"),
    ("  Could NOT find Torch (missing: TORCH_LIBRARY)", "cmake.torch-library-missing"),
    ("  what():  Cannot query cuDNN version without ATen_cuda library. PyTorch splits its backend", "link.as-needed"),
    ("libtch/torch_api_generated.cpp:640:104: error: invalid initialization of reference of type", "version.mismatch"),
    ("src/main.cpp:9:12: error: 'InferenceMode' is not a member of 'torch'", "version.mismatch"),
    ("/usr/bin/ld: /opt/libtorch/lib/libtorch_cpu.so: error adding symbols: DSO missing from command line",
     "link.library-missing"),
])
def test_each_tools_words_for_a_cause(text, want):
    assert ids(text) == [want]


# -- look-alikes: facts decide, and say so --

NO_CUDA = "RuntimeError: Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend."


def machine(variant: str) -> MachineFacts:
    return MachineFacts(install=LibtorchInstall(root="/opt/libtorch", origins=["LIBTORCH"], include_dirs=[],
                                                lib_dir="/opt/libtorch/lib", exists=True, complete=True,
                                                version="2.13.0", variant=variant))


def test_a_cpu_libtorch_means_not_compiled_a_cuda_one_means_the_dropped_library():
    (cpu,) = explain_text(NO_CUDA, machine("cpu"))
    (cuda,) = explain_text(NO_CUDA, machine("cu126"))
    assert cpu.id == "cuda.not-compiled" and "chosen by: the active libtorch is a CPU build" in cpu.detail
    assert cuda.id == "link.as-needed" and "chosen by: the active libtorch is a CUDA build" in cuda.detail


def test_the_logs_own_build_words_decide_without_facts():
    (f,) = explain_text("-- Found Torch: /opt/libtorch-2.7.0+cu126/lib/libtorch.so\n" + NO_CUDA)
    assert f.id == "link.as-needed" and "'+cu126'" in f.detail
    (g,) = explain_text("unzip libtorch-shared-with-deps-2.7.0+cpu.zip\n" + NO_CUDA)
    assert g.id == "cuda.not-compiled" and "'+cpu'" in g.detail


def test_a_python_traceback_means_a_cpu_torch():
    log = (LOGS / "cuda.not-compiled--gazefollowing-7.log").read_text(encoding="utf-8")
    (f,) = explain_text(log)
    assert f.id == "cuda.not-compiled" and "Python torch" in f.detail


@pytest.mark.parametrize("file", ["cuda.not-compiled--bimpm-6.log", "cuda.not-compiled--ultrack-154.log"])
@pytest.mark.parametrize("dress", [
    lambda data: b"".join(b"2024-01-01T00:00:00.0000000Z " + ln for ln in data.splitlines(keepends=True)),
    lambda data: b"".join(b"[rank3]: " + ln for ln in data.splitlines(keepends=True)),
    lambda data: b"".join(b"#12 45.67 " + ln for ln in data.splitlines(keepends=True)),
    lambda data: b"".join(b"##[error]" + ln for ln in data.splitlines(keepends=True)),
    lambda data: b"".join(b"\t" + ln for ln in data.splitlines(keepends=True)),
    lambda data: b"\xef\xbb\xbf" + data,  # a UTF-8 byte-order mark, as a Windows editor saves a paste
], ids=["ci-timestamp", "rank", "buildkit", "gh-annotation", "tab", "bom"])
def test_pythons_own_runtime_error_is_read_as_the_signs_read_it(file, dress):
    """Python's `RuntimeError: Cannot initialize CUDA …` decides the pair at the start of its line
    as the signs read that line, whatever a runner, a paste or an editor put before it."""
    (f,) = explain_text(dress((LOGS / file).read_bytes()))
    assert f.id == "cuda.not-compiled", f.detail
    assert "chosen by: the error comes from Python torch" in f.detail and "'RuntimeError: Cannot initialize CUDA'" in f.detail


def test_a_cpp_program_saying_the_same_decides_nothing():
    (f,) = explain_text("terminate called after throwing an instance of 'c10::Error'\n"
                        "  what():  Cannot initialize CUDA without ATen_cuda library.\n")
    assert f.id == "link.as-needed" and "chosen by: the table's order" in f.detail


def test_with_nothing_to_decide_the_finding_says_so_and_invents_no_fact():
    (f,) = explain_text(NO_CUDA)
    assert "neither this machine's facts nor the log show" in f.detail
    assert "is a CPU build" not in f.detail and "is a CUDA build" not in f.detail


def test_torch_not_compiled_with_cuda_is_never_second_guessed():
    (f,) = explain_text("AssertionError: Torch not compiled with CUDA enabled", machine("cu126"))
    assert f.id == "cuda.not-compiled"


@pytest.fixture(scope="module")
def needed_by_log(tmp_path_factory) -> str:
    """GNU ld's real output for a libtorch_cpu whose libc10 is not on the link path (stub
    libraries with the real names and NEEDED entries: a second or two of g++)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.fail("g++ is needed (apt-get install g++)")
    d = tmp_path_factory.mktemp("needed")
    (d / "a").mkdir()
    (d / "b").mkdir()
    (d / "c10.cpp").write_text("#include <string>\nnamespace c10 { namespace detail { void torchCheckFail("
                               "const char*, const char*, unsigned, const std::string&) {} } }\n")
    (d / "tc.cpp").write_text("#include <string>\nnamespace c10 { namespace detail { void torchCheckFail("
                              "const char*, const char*, unsigned, const std::string&); } }\n"
                              "void torch_cpu_entry() { c10::detail::torchCheckFail(\"a\", \"b\", 1, \"c\"); }\n")
    (d / "main.cpp").write_text("void torch_cpu_entry();\nint main() { torch_cpu_entry(); }\n")
    run = lambda *a: subprocess.run([gxx, *a], cwd=d, capture_output=True, text=True)  # noqa: E731
    assert run("-shared", "-fPIC", "c10.cpp", "-o", "a/libc10.so").returncode == 0
    assert run("-shared", "-fPIC", "tc.cpp", "-o", "b/libtorch_cpu.so", "-La", "-lc10").returncode == 0
    out = run("main.cpp", "-o", "main", "-Lb", "-ltorch_cpu")
    assert out.returncode != 0 and "needed by b/libtorch_cpu.so, not found" in out.stderr
    return out.stderr


def test_needed_by_not_found_is_a_link_path_problem_not_an_abi_one(needed_by_log):
    (f,) = explain_text(needed_by_log)  # --no-facts: the log alone
    assert f.id == "link.library-missing"
    assert "explains line 2 too (abi.mismatch)" in f.detail  # the undefined c10:: symbol is its consequence
    assert "ABI" not in f.detail and "old" not in f.detail.lower().split("explains")[0]


# g++ main.cpp with libtorch's headers and no -ltorch / -lc10: the undefined symbols of a tensor program
NOT_LINKED = [
    "g++ -std=c++17 -I/opt/libtorch/include -I/opt/libtorch/include/torch/csrc/api/include main.cpp -o main",
    "/usr/bin/ld: /tmp/ccQ3xk2A.o: in function `main':",
    "main.cpp:(.text+0x5d): undefined reference to `at::_ops::randn::call(c10::ArrayRef<c10::SymInt>, "
    "std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)'",
    "main.cpp:(.text+0x9a): undefined reference to `at::print(std::ostream&, at::Tensor const&, long)'",
    "main.cpp:(.text+0x1b4): undefined reference to `c10::TensorImpl::release_resources()'",
    "main.cpp:(.text+0x1f2): undefined reference to `c10::UndefinedTensorImpl::_singleton'",
    "main.cpp:(.text+0x2a8): undefined reference to `c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)'",
    "collect2: error: ld returned 1 exit status",
]


def test_torch_symbols_with_one_name_under_both_abis_mean_libtorch_is_not_linked():
    """A CXX11 program's undefined torch symbols that name no std::string have the same name in a libtorch
    of either ABI: libtorch is not on the link line, and the ABI fix (-D_GLIBCXX_USE_CXX11_ABI=0) would be
    harmful. No id fits: none is named, with or without this machine's facts."""
    log = "\n".join(NOT_LINKED)
    assert ids(log) == [] and ids(log, machine("cpu")) == []
    only_strings = "\n".join(line for line in NOT_LINKED if "std::__cxx11" in line or "undefined" not in line)
    assert ids(only_strings) == ["abi.mismatch"]  # the string symbol alone is the ABI's
    # an old-ABI program's untagged symbol may return a std::string ([abi:cxx11] in a CXX11 libtorch): still the ABI
    old = ("x.cpp:(.text+0x7aa): undefined reference to `c10::Error::Error(c10::SourceLocation, std::string const&)'\n"
           "x.cpp:(.text+0x12ef): undefined reference to `c10::Error::msg() const'")
    assert ids(old) == ["abi.mismatch"]


def test_root_cause_is_primary_and_consequences_are_listed():
    log = (LOGS / "arch.mismatch--tch-rs-464.log").read_text(encoding="utf-8")
    (f,) = explain_text(log)
    assert f.id == "arch.mismatch" and "explains line" in f.detail and "link.library-missing" in f.detail
