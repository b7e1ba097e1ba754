# kairosd_env.sh - the private kairosd of a GPU suite section, and the shim.conf through
# which the shims under `kairos run` find it (sourced by the sections; uses $bin).
# DIR holds its kairosd.yaml, whose socket: must be DIR/kairosd.sock.

# kairosd_shim_conf DIR: writes DIR/shim.conf naming DIR/kairosd.sock and exports
# KAIROS_SHIM_CONF: how the shims find this daemon (libkairos(7)), never KAIROS_SOCKET.
kairosd_shim_conf() {
  printf 'socket: %s\non_daemon_down: closed\n' "$1/kairosd.sock" > "$1/shim.conf"
  chmod 0644 "$1/shim.conf"
  export KAIROS_SHIM_CONF=$1/shim.conf
}

# kairosd_start DIR LOG [OPTION...]: starts $bin/kairosd -c DIR/kairosd.yaml OPTION... in
# the background, its output appended to LOG; sets kd_pid; waits up to 5 s for its socket.
kairosd_start() {
  local dir=$1 log=$2
  shift 2
  "$bin/kairosd" -c "$dir/kairosd.yaml" "$@" >> "$log" 2>&1 &
  kd_pid=$!
  for _ in $(seq 100); do [ -S "$dir/kairosd.sock" ] && break; sleep 0.05; done
}

# kairosd_private DIR LOG < TENANTS: the private kairosd of a section: writes
# DIR/kairosd.yaml (socket DIR/kairosd.sock, state DIR/state.json, root an
# administrator, the audit every second reporting only) with the tenants list read
# from standard input (YAML list items), exports KAIROS_SOCKET for kairos's own
# connection, writes the shims' shim.conf and starts kairosd (kairosd_start).
kairosd_private() {
  local dir=$1 log=$2
  {
    printf 'socket: %s\nstate: %s\nadmins: [0]\n' "$dir/kairosd.sock" "$dir/state.json"
    printf 'audit: { interval_ms: 1000, kill: false }\ntenants:\n'
    cat
  } > "$dir/kairosd.yaml"
  export KAIROS_SOCKET=$dir/kairosd.sock  # kairos's own connection
  kairosd_shim_conf "$dir"
  kairosd_start "$dir" "$log"
}
