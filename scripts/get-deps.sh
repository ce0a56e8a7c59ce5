#!/usr/bin/env bash
# get-deps.sh: Hasktorch's classic `deps/get-deps.sh` flags, done by `doctor fetch-libtorch`
# (checksums, resume, atomic install, Hasktorch's cache layout). Unlike the original it fails
# loudly: unknown flags, bad values and missing tools all exit non-zero.
set -euo pipefail

prog=${0##*/}

usage() {
    cat <<EOF
Usage: $prog [-a ARCH] [-n] [-s] [-h] [-- DOCTOR-FETCH-OPTIONS...]

Fetch libtorch into \$LIBTORCH_HOME/<version>/<platform>/<ARCH> (Hasktorch's layout).

  -a ARCH  cpu, cuXYZ (e.g. cu130) or rocmX.Y; default \$LIBTORCH_CUDA_VERSION, else
           the variant doctor recommends for this machine
  -n       the nightly libtorch instead of a release
  -s       skip the download: succeed only if libtorch is already installed
  -h       show this help

Environment: LIBTORCH_VERSION (release to fetch; default: doctor's choice),
LIBTORCH_HOME (cache root), DOCTOR (how to run doctor, e.g. "python3 -m doctor").
Anything after -- goes to \`doctor fetch-libtorch\` (e.g. -- --dest deps/libtorch).
EOF
}

arch="${LIBTORCH_CUDA_VERSION:-auto}"
nightly=0
skip=0
while getopts ":a:nsh" opt; do
    case "$opt" in
        a) case "$OPTARG" in
               -*) echo "$prog: option -a needs a value (try -h)" >&2; exit 2 ;;
           esac
           arch="$OPTARG" ;;
        n) nightly=1 ;;
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
