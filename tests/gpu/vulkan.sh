# vulkan.sh - the vulkan section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $OUT and the exported KAIROS_SHIM): what a Vulkan program sees of its GPU's memory
# natively and under a 2 GiB quota (tests/gpu/vk_heaps.c: heap sizes, the
# VK_EXT_memory_budget budget, device-local memory allocated 256 MiB at a time until
# refused), and a recording of the RM calls Vulkan makes (vk-heaps.nvtrace), which
# says where it reads its heap sizes. Needs libvulkan.so.1 and NVIDIA's ICD, which
# lives in libGLX_nvidia.so.0 and needs glvnd's libGLdispatch: where the machine has
# no loader, carry Debian's libvulkan1, libglvnd0, libglx0, libgl1, libegl1,
# libopengl0 and libgles2 in .gl/ (scripts/gpu-gl fetches them). On the lent H100 of
# 2026-12-05 (driver 580.159.04) with libvulkan1 alone carried, the ICD gave no
# vkCreateInstance (VK_ERROR_INCOMPATIBLE_DRIVER); with all of them, on 2026-12-07, it
# ran (bench/results/2026-12-07-h100-vulkan).
echo "--- vulkan: heaps and budget, native and under a 2 GiB quota"
vdir=$OUT/vulkan
mkdir -p "$vdir"
if [ ! -x "$bin/vk_heaps" ]; then
  echo "vulkan: skipped (vk_heaps not built: no Vulkan headers where gpu-carry ran)"
else
  . tests/gpu/graphics.sh
  gl_loaders_need libvulkan.so.1
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f "$icd" ] && export VK_DRIVER_FILES=$icd
  graphics_probe vulkan "$vdir" "$OUT/vk-heaps.nvtrace" "$bin/vk_heaps" "--alloc-mib 256" \
    "--alloc-mib 256"
fi
