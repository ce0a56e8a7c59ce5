"""Look-alikes the log's words cannot tell apart: let facts decide, and say which facts did.

"Could not run '…' with arguments from the 'CUDA' backend", "PyTorch is not linked with
support for cuda devices" and "Cannot initialize CUDA without ATen_cuda library" are printed
both by a CPU-only libtorch (cuda.not-compiled: fetch a CUDA variant) and by a CUDA libtorch
whose libtorch_cuda the linker dropped (link.as-needed: link it with --no-as-needed). The
evidence, strongest first:

1. the machine's facts: the active libtorch's variant (`doctor explain` without --no-facts);
2. the log's own words about the build: `+cu126`, `libtorch_cuda.so`, `torch_cuda.dll`,
   `Caffe2: CUDA detected` say CUDA; `+cpu`, `libtorch-…-cpu`, `/cpu/libtorch` say CPU;
3. where the error was raised: a Python traceback means torch's own extension module, which
   always links torch_cuda when the build has it, so the build is CPU-only (0.4–1.0 CPU
   builds raised the ATen_cuda message: pytorch#11430); so does a proving line that is Python's
   own `RuntimeError: Cannot initialize CUDA …`, read as the signs read it (runner prefixes,
   indentation and a byte-order mark off: doctor/explain/normalise.py), not in the raw log;
4. none of these: the table's own order (link.as-needed, the rarer and more specific cause,
   folds cuda.not-compiled) stands, and the finding says the log could not decide.

Pure: facts in, a decision and the sentence that justifies it out; no Host, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from doctor.explain.patterns import symbol_abi
from doctor.record import record

PAIR = ("link.as-needed", "cuda.not-compiled")
# Log words that name the build. Bounded, literal-led patterns: one pass over the log, run
# only when one of the pair was found.
_CUDA_BUILD = re.compile(rb"\+cu\d{2,3}\b|\bcu\d{3}\b|libtorch_cuda\w*\.so|torch_cuda\w*\.(?:dll|lib)|"
                         rb"Caffe2: CUDA detected|TORCH_CUDA_VERSION=cu\d+")
_CPU_BUILD = re.compile(rb"\+cpu\b|libtorch[\w.-]*-cpu\b|/cpu/libtorch|libtorch-[\w.-]*%2Bcpu")
_PYTHON = re.compile(rb"Traceback \(most recent call last\)|<ipython-input-|site-packages[\\/]torch[\\/]nn[\\/]")
# Python's own words for the ATen_cuda error, at the start of a proving line as the signs read it
_PYTHON_RAISED = "RuntimeError: Cannot initialize CUDA"


_RE2: dict = {}


def search(pattern: re.Pattern[bytes], data: bytes, pos: int = 0, endpos: int | None = None):
    """pattern.search(data), run by RE2 over the raw bytes (Latin-1: a byte is a character).

    The stdlib engine tries these alternations at every byte that could start one: 1.1 s for
    `_CPU_BUILD` and 2.6 s for `_PYTHON` over a 100 MB log without a match; RE2 runs them as a
    DFA, linear at ~1 GB/s. Same answer: the patterns use literals, ASCII classes (\\d, \\w)
    and \\b, which both engines read alike, and both take the leftmost match and, there, the
    first alternative (tests/explain/test_collect.py compares them).
    """
    compiled = _RE2.get(pattern)
    if compiled is None:
        import re2

        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.max_mem = 64 << 20
        compiled = _RE2[pattern] = re2.compile(pattern.pattern, options)
    return compiled.search(data, pos, len(data) if endpos is None else endpos)


_KINDS = {"cuda": _CUDA_BUILD, "cpu": _CPU_BUILD, "python": _PYTHON}
_ANY: dict[tuple[str, ...], re.Pattern[bytes]] = {}


def build_words(data: bytes) -> dict[str, object]:
    """The first match of each of `_KINDS` in the log, as a search for each would give it, in one
    pass over the log when none is there (the common case; three searches took three passes).

    The pass looks for any kind still missing; where one matches, each missing kind is tried at
    that same place (an alternation reports only one of several matches that start there). No
    match spans a line, so that try reads one line."""
    found: dict[str, object] = {}
    pos = 0
    while left := tuple(k for k in _KINDS if k not in found):
        pattern = _ANY.get(left)
        if pattern is None:
            pattern = _ANY[left] = re.compile(b"|".join(b"(?:" + _KINDS[k].pattern + b")" for k in left))
        m = search(pattern, data, pos)
        if m is None:
            break
        start = m.start()
        end = data.find(b"\n", start)
        for kind in left:
            here = search(_KINDS[kind], data, start, len(data) if end < 0 else end)
            if here is not None and here.start() == start:
                found[kind] = here
        pos = start + 1
    return found


# Words only a CPU-only torch prints (torch.cuda's own check): no decision needed.
_SURELY_CPU = re.compile(r"not compiled with CUDA enabled")


def ambiguous(lines: list[str]) -> bool:
    """Do these proving lines leave the pair open (none of them is a CPU build's own words)?"""
    return not any(_SURELY_CPU.search(line) for line in lines)


@record(frozen=True)
class Decision:
    id: str  # the id the finding gets
    evidence: str  # which fact chose it, in words


def variant_of(facts) -> str | None:
    """'cpu' or 'cuda' from MachineFacts (the active libtorch), or None."""
    install = getattr(facts, "install", None)
    variant = getattr(install, "variant", None) or ""
    if variant == "cpu":
        return "cpu"
    if variant.startswith("cu"):
        return "cuda"
    return None


def decide(data: bytes, facts=None, hits=()) -> Decision | None:
    """Which of the pair a log that shows one of them means; None when nothing decides. `hits`: the
    pair's proving lines (engine.Hit), as the signs read them."""
    variant = variant_of(facts)
    if variant == "cpu":
        return Decision("cuda.not-compiled", f"the active libtorch is a CPU build ({facts.install.label})")
    if variant == "cuda":
        return Decision("link.as-needed", f"the active libtorch is a CUDA build ({facts.install.label})")
    words = build_words(data)
    cuda, cpu = words.get("cuda"), words.get("cpu")
    if cuda and not cpu:
        return Decision("link.as-needed", f"the log names a CUDA build: {_shown(cuda)}")
    if cpu and not cuda:
        return Decision("cuda.not-compiled", f"the log names a CPU build: {_shown(cpu)}")
    python = words.get("python")
    shown = _shown(python) if python else next(
        (f"'{_PYTHON_RAISED}'" for h in hits if h.line.startswith(_PYTHON_RAISED)), None)
    if shown:
        return Decision("cuda.not-compiled", "the error comes from Python torch, whose extension always links "
                        f"torch_cuda when the build has it ({shown})")
    return None


def _shown(m) -> str:
    return "'" + m.group(0).decode("utf-8", "replace").strip() + "'"


# -- the torch/_C pair: "Failed to load PyTorch C extensions" / "No module named 'torch._C'" --
#
# Both say that the torch/ Python imported has no compiled `_C` for this interpreter. Where that
# torch/ is decides why: an installed torch lives in a site-packages (venv, conda, pip --user) or
# dist-packages (Debian's Python) folder; any other one (a PyTorch checkout in the current folder,
# a copy on PYTHONPATH) is ahead of the installed torch on sys.path. The traceback's frame of
# torch/__init__.py names it; a pasted error without the traceback decides nothing.
TORCH_C = ("python.torch-shadowed", "python.torch-extension-missing")
_INSTALLED = re.compile(r"[\\/](?:site|dist)-packages[\\/]torch$", re.I)


def torch_package(hits) -> str | None:
    """The torch/ Python took: of the torch/ folders the torch/__init__.py frames name before the
    first error line (a log may hold several tracebacks), the one named last for the first time;
    the first one named when none comes before it. By first mentions, because a long log's
    repeated lines are counted, not kept (engine.collect): a later repeat has no place of its own."""
    first: dict[str, int] = {}
    for h in sorted((h for h in hits if h.groups.get("package")), key=lambda h: h.lineno):
        first.setdefault(h.groups["package"], h.lineno)
    if not first:
        return None
    errors = [h.lineno for h in hits if h.trigger]
    before = [package for package, lineno in first.items() if errors and lineno <= min(errors)]
    return before[-1] if before else next(iter(first))


def decide_torch_c(hits) -> Decision | None:
    package = torch_package(hits)
    if package is None:
        return None
    if _INSTALLED.search(package):
        return Decision("python.torch-extension-missing", f"the torch Python imported is an installed one ({package})")
    return Decision("python.torch-shadowed", f"the torch Python imported is not in a site-packages folder ({package})")


# -- abi.mismatch, or libtorch not on the link line at all --
#
# _GLIBCXX_USE_CXX11_ABI renames only the symbols whose signature holds std::string or std::list, and
# the functions returning one, which the CXX11 ABI tags [abi:cxx11] (docs/findings/abi.mismatch.md).
# A program compiled with the CXX11 ABI names each such symbol with std::__cxx11:: or that tag, so its
# undefined torch symbols without either have one name under both ABIs: a libtorch of either ABI on
# the link line defines them. When the log shows such symbols beside the string ones, libtorch is not
# linked at all (no -ltorch / -lc10), and -D_GLIBCXX_USE_CXX11_ABI=0 cannot help: no id is named. An
# old-ABI program's untagged symbols decide nothing: its `c10::Error::msg() const` is
# `c10::Error::msg[abi:cxx11]() const` in a CXX11 libtorch (pytorch#35518).
NOT_LINKED = "abi.mismatch"


def not_linked(match) -> bool:
    """Does this abi.mismatch match show a CXX11 program whose libtorch is not on the link line?"""
    return bool(match.values("unmarked")) and {symbol_abi(s) for s in match.values("symbol")} == {"cxx11"}


@record(frozen=True)
class LookAlikes:
    """Two ids whose lines are the same words, and how to choose between them."""
    ids: tuple[str, str]  # in the table's order: the first folds the second
    ambiguous: Callable[[list[str]], bool]  # do the proving lines leave the pair open?
    decide: Callable[[bytes, object, list], Decision | None]  # (log, machine facts, the pair's hits)
    undecided: str  # what chose the id when nothing did


LOOK_ALIKES = (
    LookAlikes(PAIR, ambiguous, decide,
               "chosen by: the table's order; neither this machine's facts nor the log show whether the libtorch is "
               "a CPU or a CUDA build"),
    LookAlikes(TORCH_C, lambda lines: True, lambda data, facts, hits: decide_torch_c(hits),
               "chosen by: the table's order; the log shows no traceback frame of torch/__init__.py, so whether that "
               "torch/ is the installed one (then python.torch-extension-missing: reinstall it for this Python) is open"),
)
