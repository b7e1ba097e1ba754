# gl_loaders.sh - sourced by the vulkan and opengl sections of scripts/gpu-suite:
# gl_loaders_need LIB unpacks the Debian packages carried in .gl/ (scripts/gpu-gl: the
# Vulkan loader, glvnd's libGLdispatch, libEGL, libOpenGL, libGLX...) into / where the
# GPU machine's linker cache has no LIB (libvulkan.so.1, libEGL.so.1), then refreshes
# the cache. NVIDIA's vendor libraries (libGLX_nvidia, libEGL_nvidia) are the driver's.
gl_loaders_need() {
  if ! ldconfig -p | grep -q "$1" && ls .gl/*.deb >/dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
}
