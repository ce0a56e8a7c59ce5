#!/usr/bin/env bash
# Run on a GPU machine with a CUDA torch wheel: bash tests/clients/device-check.sh (results in $OUT).
# issue 18 device check: does the link from `doctor emit cargo` keep libtorch_cuda (and start CUDA)
# where a plain --as-needed link drops it? Against the device's own torch CUDA wheel.
set -x
cd "$(dirname "$0")" || exit 2; REPO=$(cd ../.. && pwd); OUT=${OUT:-$(mktemp -d)}
T=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
python3 -c 'import torch;print(torch.__version__, torch.cuda.is_available(), torch._C._GLIBCXX_USE_CXX11_ABI)'
printf "%s\n" "$T"/lib/libtorch* "$T"/lib/libc10*
PYTHONPATH=$REPO python3 -m doctor emit cargo --libtorch "$T" -o "$OUT/config.toml" || exit 3
cat "$OUT/config.toml"
mapfile -t ARGS < <(python3 -c 'import tomllib;f=tomllib.load(open("'"$OUT"'/config.toml","rb"))["build"]["rustflags"];print("\n".join(a.split("=",1)[1] for a in f if a.startswith("link-arg=")))')
printf 'link-arg: %s\n' "${ARGS[@]}"
CXX="g++ -w -std=c++17 cuda_probe.cpp -I$T/include -I$T/include/torch/csrc/api/include -L$T/lib"
$CXX -Wl,--as-needed -ltorch -ltorch_cpu -lc10 -Wl,-rpath,"$T/lib" -o "$OUT/plain" &
$CXX -Wl,--as-needed -ltorch -ltorch_cpu -lc10 "${ARGS[@]}" -o "$OUT/emitted" &
wait
"$OUT/plain" > "$OUT/plain.out" 2> "$OUT/plain.err"; echo "plain rc=$?"
env -u LD_LIBRARY_PATH "$OUT/emitted" > "$OUT/emitted.out" 2> "$OUT/emitted.err"; echo "emitted rc=$?"
readelf -d "$OUT/plain" "$OUT/emitted" | grep -E 'File|NEEDED|RUNPATH|RPATH' > "$OUT/needed.txt"
cat "$OUT/plain.out" "$OUT/emitted.out" "$OUT/needed.txt"; head -c 400 "$OUT/plain.err"; head -c 400 "$OUT/emitted.err"
