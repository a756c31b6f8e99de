#!/usr/bin/env bash
# tools/gpu_bundle.sh [BUILD_DIR] [BUNDLE] — packs a CUDA build of kiln made here (kiln, kiln_tests and
# the libraries they link that a bare CUDA image lacks: oneDNN, OpenMPI, toml++, ...) into one
# archive that travels to a GPU machine without kiln's build dependencies, with the CPU's reference
# losses of the check's correctness steps computed here (`tools/gpu_check.sh --prepare-references`
# into references/, which the check reads from its build directory), so that the GPU's minutes do
# not go to CPU runs.
# There: `tar xzf BUNDLE -C DIR`, then `KILN_GPU_BUILD_DIR=DIR tools/gpu_check.sh --prebuilt`.
# DIR/kiln and DIR/kiln_tests are wrappers that put the bundled libraries, and the directories where
# that machine keeps cuDNN, cuBLASLt and NCCL (its CUDA toolkit, or PyTorch's wheels), on the
# library path of kiln alone, so a Python run beside it keeps its own libraries.
# Build portably (-DKILN_NATIVE=OFF): the GPU machine's processor is not this one.
# Defaults: BUILD_DIR build-gpu, BUNDLE .gpu/bundle.tgz (.gpu/ is ignored by git).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
bundle=${2:-$root/.gpu/bundle.tgz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$(dirname "$bundle")"

# The C runtime, the C++ runtime and the GPU driver come from the machine itself; so do cuDNN
# (too large to carry) and the CUDA libraries opened at run time.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudnn)'
for program in kiln kiln_tests; do
  cp "$build/$program" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$program"
  ldd "$build/$program" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $system || -e $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
  done
done

cat >"$stage/wrapper" <<'SH'
#!/usr/bin/env bash
here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -f $here/cuda_dirs ]]; then
  find /usr/local /opt /usr/lib -name libcudnn.so.9 -o -name 'libcublasLt.so.1[0-9]' -o -name libnccl.so.2 \
    2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd: >"$here/cuda_dirs"
fi
export LD_LIBRARY_PATH=$here/lib:$(cat "$here/cuda_dirs")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$here/bin/$(basename "$0")" "$@"
SH
chmod +x "$stage/wrapper"
ln "$stage/wrapper" "$stage/kiln"
ln "$stage/wrapper" "$stage/kiln_tests"
rm "$stage/wrapper"

KILN_GPU_BUILD_DIR=$build "$root/tools/gpu_check.sh" --prepare-references "$stage/references"

tar czf "$bundle" -C "$stage" .
echo "$bundle: $(du -h "$bundle" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries)"
