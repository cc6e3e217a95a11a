# Helpers for the Debian roots the scripts keep (scripts/slurm-release's
# release chroots, scripts/build-root's build root): sourced, not run.

# root_busy ROOT: a process runs with ROOT as its root directory.
root_busy() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [[ $r == "$1" ]] && return 0
  done
  return 1
}

# root_umount_all ROOT: every mount under ROOT, deepest first, as the
# kernel lists them.
root_umount_all() {
  local m
  while read -r m; do
    umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk -v r="$1/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
}
