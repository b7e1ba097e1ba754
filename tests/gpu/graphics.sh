# graphics.sh - sourced by the vulkan and opengl sections of scripts/gpu-suite.
# gl_loaders_need LIB unpacks the Debian packages carried in .gl/ (scripts/gpu-gl: the
# Vulkan loader, glvnd's libGLdispatch, libEGL, libOpenGL, libGLX...) into / where the
# GPU machine's linker cache has no LIB (libvulkan.so.1, libEGL.so.1), then refreshes
# the cache. NVIDIA's vendor libraries (libGLX_nvidia, libEGL_nvidia) are the driver's.
# graphics_probe SECTION DIR RECORDING PROBE NATIVE_ARGS QUOTA_ARGS runs PROBE natively
# and under a 2 GiB quota (the shim standalone, $KAIROS_SHIM) into DIR/native.txt and
# DIR/quota-2g.txt, records its RM calls under `$kairos trace` into RECORDING, and
# prints each run's exit status (124: ended by its 40 s timeout) and the first 600
# characters of its two outputs.
gl_loaders_need() {
  if ! ldconfig -p | grep -q "$1" && ls .gl/*.deb >/dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
}

graphics_probe() {
  local section=$1 dir=$2 recording=$3 probe=$4 native_args=$5 quota_args=$6
  # shellcheck disable=SC2086 # the arguments are words
  timeout 40 "$probe" $native_args > "$dir/native.txt" 2>&1
  echo "$section: native exit $?"
  # shellcheck disable=SC2086
  timeout 40 env KAIROS_MEM=2G LD_PRELOAD="$KAIROS_SHIM" "$probe" $quota_args \
    > "$dir/quota-2g.txt" 2>&1
  echo "$section: under KAIROS_MEM=2G exit $?"
  timeout 40 "$kairos" trace --record "$recording" --output "$dir/trace.txt" -- "$probe" \
    > /dev/null 2>&1
  echo "$section: traced exit $?"
  for f in native quota-2g; do
    echo "$section: $f: $(tr '\n' ' ' < "$dir/$f.txt" | cut -c1-600)"
  done
}
