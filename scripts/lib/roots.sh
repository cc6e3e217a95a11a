# shellcheck shell=bash
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

# bind_here SRC DST: DST shows SRC as it is now. A bind mount left by an
# earlier run stays on the directory it was made from even once that
# directory is deleted and made again at the same path (a fresh clone where
# the last one was): inside, getcwd fails and make finds no Makefile. So a
# mount of another directory is dropped and made again.
bind_here() {
  local src=$1 dst=$2
  mkdir -p "$dst"
  if mountpoint -q "$dst"; then
    [[ $(stat -c %d:%i "$src") == "$(stat -c %d:%i "$dst" 2>/dev/null)" ]] && return 0
    umount -R "$dst" 2>/dev/null || umount -l "$dst"
  fi
  mount --bind "$src" "$dst"
}
