#!/usr/bin/env bash
# Build the qdevolve sandbox image WITHOUT a registry: `docker import` of a minimal root file
# system made from the host's own Python (interpreter, stdlib, the shared libraries they
# need) plus qdevolve's trusted runner. Users with a registry can use ./Dockerfile instead.
#
#   bash sandboxes/docker/build-image.sh            # -> qdevolve-sandbox:latest
#   QDEVOLVE_SANDBOX_IMAGE=name:tag PYTHON=/usr/bin/python3.11 bash sandboxes/docker/build-image.sh
#
# The interpreter must match the minor version of the controller's Python when evaluators
# import the controller's site-packages (mounted read-only at run time).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
image="${QDEVOLVE_SANDBOX_IMAGE:-qdevolve-sandbox:latest}"
ver="$(PYTHONPATH= "${CONTROLLER_PYTHON:-$repo/.venv/bin/python}" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null || python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
py="${PYTHON:-/usr/bin/python$ver}"
[ -x "$py" ] || { echo "build-image.sh: no interpreter at $py (set PYTHON=...)" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "build-image.sh: no Docker engine (start dockerd)" >&2; exit 1; }

root="$(mktemp -d /tmp/qdevolve-image-XXXXXX)"
trap 'rm -rf "$root"' EXIT
stdlib="$("$py" -I -S -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"
dynload="$("$py" -I -S -c 'import sysconfig; print(sysconfig.get_config_var("DESTSHARED") or "")')"
real="$(readlink -f "$py")"

for d in lib lib32 lib64 libx32 bin sbin; do [ -L "/$d" ] && ln -sfn "$(readlink "/$d")" "$root/$d"; done
copy() { # copy a path (and, for a link, its target) into the root fs, under its canonical dir
    local p="$1" dir
    dir="$(readlink -f "$(dirname "$p")")"
    mkdir -p "$root$dir"
    [ -e "$root$dir/$(basename "$p")" ] || cp -a "$p" "$root$dir/"
    if [ -L "$p" ]; then local t; t="$(readlink -f "$p")"; [ -e "$root$t" ] || copy "$t"; fi
}
copy "$real"
[ "$py" != "$real" ] && copy "$py"
# rm, chmod: the runner empties /tmp and the work dir of a warm container with `chmod -R` and
# `rm -rf` (fd-based, no depth limit); they need only libc
copy "$(readlink -f "$(command -v rm)")"
copy "$(readlink -f "$(command -v chmod)")"
mkdir -p "$root$(dirname "$stdlib")"
tar -C / --exclude='*/test/*' --exclude='*/tests/*' --exclude='*/idlelib/*' --exclude='*/tkinter/*' \
    --exclude='*/ensurepip/*' -cf - "${stdlib#/}" | tar -C "$root" -xf -
if [ -n "$dynload" ] && [ -d "$dynload" ] && [ ! -d "$root$dynload" ]; then
    tar -C / -cf - "${dynload#/}" | tar -C "$root" -xf -
fi
# shared libraries of the interpreter, its extension modules and the common C++/Fortran runtimes
libs="$( { ldd "$real"; ldd "$(readlink -f "$(command -v rm)")"; ldd "$(readlink -f "$(command -v chmod)")"; find "$root" -name '*.so*' -type f -exec ldd {} \; 2>/dev/null;
          for l in libgcc_s.so.1 libstdc++.so.6 libgomp.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 libresolv.so.2 libcrypt.so.1 libffi.so.8 libgfortran.so.5 libquadmath.so.0; do ldconfig -p | awk -v l="$l" '$1==l && /x86-64|x86_64|64bit/ {print "x => " $NF}' | head -1; done; } \
        | awk '/=>/ {print $3} /^\t\/lib/ {print $1}' | grep '^/' | sort -u)"
for lib in $libs; do [ -e "$lib" ] && copy "$lib"; done
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/etc" "$root/proc" "$root/dev" "$root/sys" \
         "$root/qdevolve/runner" "$root/qdevolve/work" "$root/qdevolve/evaluators" "$root/opt/qdevolve"
ln -sf "$real" "$root/usr/local/bin/python3"
ln -sf "$real" "$root/usr/local/bin/python"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
# the trusted side (the backend mounts the controller's own staged copy over /qdevolve/runner;
# these are for running the image by hand); stdlib + ctypes only
for f in runner.py _wire.py _standin.py candidate.py _mountview.py _procctl.py zygote.py _importguard.py _codeorigin.py; do
    cp "$repo/qdevolve/sandbox/$f" "$root/opt/qdevolve/$f"
done
chmod -R a+rX "$root"
tar -C "$root" -cf - . | docker import \
    --change 'USER 65534:65534' \
    --change 'WORKDIR /qdevolve/work' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8' \
    --change 'LABEL org.qdevolve.sandbox=1' \
    --change "LABEL org.qdevolve.python=$real" \
    - "$image" >/dev/null
docker run --rm --network none --user 65534:65534 "$image" "$real" -I -S -c 'import ctypes, json, math, resource, socket, select; ctypes.CDLL(None).prctl; print("python ok")'
docker run --rm --network none --user 65534:65534 "$image" rm -rf /tmp/absent
docker run --rm --network none --user 65534:65534 "$image" chmod --version >/dev/null
echo "built $image ($(docker image inspect -f '{{.Size}}' "$image") bytes) from $real"
