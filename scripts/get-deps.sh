#!/usr/bin/env bash
# get-deps.sh: Hasktorch's classic `deps/get-deps.sh` flags (hasktorch/hasktorch 7395e0b:
# -n -c -a -s -h), done by `doctor fetch-libtorch` (checksums, resume, atomic install,
# Hasktorch's cache layout). Unlike the original it fails loudly: unknown flags, bad values and
# missing tools all exit non-zero. It does not clone pytorch or generate ATen files (the
# original's second half, for Hasktorch's own code generator), nor fetch libtokenizers (see
# docs/clients.md for why).
set -euo pipefail

prog=${0##*/}

usage() {
    cat <<EOF
Usage: $prog [-a ARCH] [-n] [-c] [-s] [-h] [-- DOCTOR-FETCH-OPTIONS...]

Fetch libtorch into \$LIBTORCH_HOME/<version>/<platform>/<ARCH> (Hasktorch's layout).

  -a ARCH  cpu, cuXYZ (e.g. cu130) or rocmX.Y; default \$LIBTORCH_CUDA_VERSION, else
           the variant doctor recommends for this machine
  -n       the nightly libtorch instead of a release
  -c       download from Hasktorch's CI mirror (github.com/hasktorch/libtorch-binary-for-ci)
           instead of download.pytorch.org; the release is \$LIBTORCH_VERSION, else $CI_DEFAULT_VERSION
           and ARCH defaults to cpu, as in Hasktorch's script
  -s       skip the download: succeed only if libtorch is already installed
  -h       show this help

Environment: LIBTORCH_VERSION (release to fetch; default: doctor's choice),
LIBTORCH_HOME (cache root), DOCTOR (how to run doctor, e.g. "python3 -m doctor").
Anything after -- goes to \`doctor fetch-libtorch\` (e.g. -- --dest deps/libtorch).
EOF
}

# Hasktorch's get-deps.sh VERSION at 7395e0b; its CI mirror has a release per version.
CI_DEFAULT_VERSION=2.9.1
CI_MIRROR=https://github.com/hasktorch/libtorch-binary-for-ci/releases/download

arch="${LIBTORCH_CUDA_VERSION:-auto}"
nightly=0
ci=0
skip=0
while getopts ":a:ncsh" opt; do
    case "$opt" in
        a) case "$OPTARG" in
               -*) echo "$prog: option -a needs a value (try -h)" >&2; exit 2 ;;
           esac
           arch="$OPTARG" ;;
        n) nightly=1 ;;
        c) ci=1 ;;
        s) skip=1 ;;
        h) usage; exit 0 ;;
        :) echo "$prog: option -$OPTARG needs a value (try -h)" >&2; exit 2 ;;
        *) echo "$prog: unknown option -$OPTARG (try -h)" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

if [ -z "$arch" ]; then
    echo "$prog: -a needs a non-empty value (cpu, cuXYZ, rocmX.Y)" >&2
    exit 2
fi

# Find doctor: $DOCTOR, then `doctor` on PATH, then a Python that can import it.
doctor=()
if [ -n "${DOCTOR:-}" ]; then
    read -r -a doctor <<<"$DOCTOR"
elif command -v doctor >/dev/null 2>&1; then
    doctor=(doctor)
else
    for py in python3 python; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import doctor.cli' >/dev/null 2>&1; then
            doctor=("$py" -m doctor)
            break
        fi
    done
fi
if [ "${#doctor[@]}" -eq 0 ]; then
    echo "$prog: torch-doctor is not installed (no \`doctor\` command, no Python that imports it)" >&2
    echo "$prog: install it with: pip install torch-doctor" >&2
    exit 127
fi
if ! command -v "${doctor[0]}" >/dev/null 2>&1; then
    echo "$prog: ${doctor[0]}: command not found (from DOCTOR=${DOCTOR:-})" >&2
    exit 127
fi

if [ "$ci" = 1 ] && [ "$nightly" = 1 ]; then
    # Hasktorch's script tests -n first, so -n wins there too.
    ci=0
fi
if [ "$ci" = 1 ]; then
    [ "$arch" = auto ] && arch=cpu
    case "$arch" in
        cpu|cu[0-9]*) ;;
        *) echo "$prog: -c: Hasktorch's CI mirror has cpu and cuXYZ builds, not '$arch'" >&2; exit 2 ;;
    esac
    version="${LIBTORCH_VERSION:-$CI_DEFAULT_VERSION}"
    case "$(uname -s)" in
        Darwin) file="cpu-libtorch-macos-latest.zip" ;;
        *) file="${arch}-libtorch-shared-with-deps-latest.zip" ;;
    esac
    args=(fetch-libtorch --variant "$arch" --version "$version" --url "$CI_MIRROR/$version/$file")
    [ "$skip" = 1 ] && args+=(--offline)
    exec "${doctor[@]}" "${args[@]}" "$@"
fi

args=(fetch-libtorch --variant "$arch")
if [ "$nightly" = 1 ]; then
    args+=(--channel nightly)
elif [ -n "${LIBTORCH_VERSION:-}" ]; then
    args+=(--version "$LIBTORCH_VERSION")
fi
if [ "$skip" = 1 ]; then
    args+=(--offline)
fi

exec "${doctor[@]}" "${args[@]}" "$@"
