# opengl.sh - the opengl section of scripts/gpu-suite (sourced; uses $bin, $kairos, $OUT
# and the exported KAIROS_SHIM): what an OpenGL program, headless through EGL's device
# platform, sees of its GPU's memory natively and under a 2 GiB quota
# (tests/gpu/gl_memory.c: GL_NVX_gpu_memory_info's dedicated and available memory,
# buffers of 256 MiB allocated and cleared until GL_OUT_OF_MEMORY or 8 GiB: under a quota the
# driver may place buffers in system memory instead of refusing them), and
# a recording of the RM calls it makes (gl-memory.nvtrace). Needs glvnd's libEGL.so.1 and
# libOpenGL.so.0 (carried in .gl/ where the machine has none: scripts/gpu-gl) and
# NVIDIA's libEGL_nvidia.so.0 with a glvnd vendor file naming it (written here when the
# machine has none).
echo "--- opengl: memory seen through EGL, native and under a 2 GiB quota"
gdir=$OUT/opengl
mkdir -p "$gdir"
if [ ! -x "$bin/gl_memory" ]; then
  echo "opengl: skipped (gl_memory not built: no EGL/GL headers where gpu-carry ran)"
else
  . tests/gpu/graphics.sh
  gl_loaders_need libEGL.so.1
  vendor=
  for d in /usr/local/nvidia/share/glvnd/egl_vendor.d /usr/share/glvnd/egl_vendor.d \
           /etc/glvnd/egl_vendor.d; do
    for f in "$d"/*nvidia*.json; do [ -f "$f" ] && vendor=$f && break 2; done
  done
  if [ -z "$vendor" ]; then
    vendor=$gdir/10_nvidia.json
    echo '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}' \
      > "$vendor"
  fi
  export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
  echo "opengl: EGL vendor file $vendor"
  graphics_probe opengl "$gdir" "$OUT/gl-memory.nvtrace" "$bin/gl_memory" \
    "--alloc-mib 256 --max-mib 8192" "--alloc-mib 256 --max-mib 8192"
fi
