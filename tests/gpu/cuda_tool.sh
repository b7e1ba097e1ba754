# cuda_tool.sh - where a GPU suite section finds a CUDA test program (sourced; uses $bin).

# cuda_tool NAME SOURCE [NVCC-ARG...]: prints $bin/NAME when scripts/gpu-carry built
# it, else builds SOURCE with nvcc into /tmp/NAME and prints that; prints $bin/NAME
# (which then fails where it is run, saying so) when neither can be had.
cuda_tool() {
  local name=$1 src=$2
  shift 2
  if [ ! -x "$bin/$name" ] && command -v nvcc >/dev/null &&
    nvcc -arch=sm_90 -O2 -o "/tmp/$name" "$src" "$@" >&2; then
    echo "/tmp/$name"
  else
    echo "$bin/$name"
  fi
}
