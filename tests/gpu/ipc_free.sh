# ipc_free.sh - memory check m13 of the GPU suite (sourced by tests/gpu/memory.sh, which
# started kairosd with tenant 'probe' at 4 GiB and defines held_of, result, $mdir):
# the exporter's own free of memory it shared with cudaIpcGetMemHandle. Goals: a
# process that shares 3 GiB and frees it, 10 times in a row, is never refused
# (churned=10; were the free of shared memory to release nothing, the second would
# not fit);
# memory that another tenant imported stays charged to the exporter after its free
# while the import lives (held_after_free_mib >= 2048), and no longer once the
# importer exits (held_after_import_end_mib: the exporter's context only), when the
# exporter allocates the memory again (realloc_ok=1); importer_held_mib is the
# importer's own context only. About 20 s.
echo "--- m13. CUDA IPC: the exporter frees what it shared (tenant 'probe', 4 GiB): 10 x"
echo "    (3 GiB cuMemAlloc + cuIpcGetMemHandle + cuMemFree); then 2 GiB imported by tenant"
echo "    'attacker' for 4 s, freed by the exporter meanwhile, allocated again after"
ipcf=$mdir/ipc-free && rm -rf "$ipcf" && mkdir -p "$ipcf"
"$kairos" run --tenant probe -- $python tests/gpu/ipc_pair.py churn "$ipcf" 3072 10 > "$mdir/ipc-churn.txt" 2>&1
cat "$mdir/ipc-churn.txt"
"$kairos" run --tenant attacker -- $python tests/gpu/ipc_pair.py import "$ipcf" 4 > "$mdir/ipc-free-import.txt" 2>&1 &
imp=$!
"$kairos" run --tenant probe -- $python tests/gpu/ipc_pair.py share-free "$ipcf" 2048 > "$mdir/ipc-free-export.txt" 2>&1 &
exp=$!
for _ in $(seq 600); do [ -e "$ipcf/freed" ] && break; sleep 0.05; done
sleep 0.5
after_free=$(( $(held_of probe) / 1048576 )); imp_held=$(( $(held_of attacker) / 1048576 ))
wait "$imp"
sleep 0.5
after_end=$(( $(held_of probe) / 1048576 ))
touch "$ipcf/done"
wait "$exp"
cat "$mdir/ipc-free-export.txt" "$mdir/ipc-free-import.txt"
grep -E "CUDA IPC import of it lives|last CUDA IPC import" "$OUT/kairosd.log" | tail -2
result "ipc_free churned=$(value churned < "$mdir/ipc-churn.txt") churn_rc=$(value rc < "$mdir/ipc-churn.txt") opened=$(value opened < "$mdir/ipc-free-import.txt") held_after_free_mib=$after_free importer_held_mib=$imp_held held_after_import_end_mib=$after_end realloc_ok=$(value realloc_ok < "$mdir/ipc-free-export.txt")"
