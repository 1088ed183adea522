# Sourced by the scripts that install packages (install-deps.sh,
# install-bench-deps.sh): apt_get ARGS... runs `$SUDO apt-get ARGS...` and
# waits for another package manager (another session's apt-get,
# unattended-upgrades) instead of failing. `-o DPkg::Lock::Timeout` makes apt
# itself wait for the dpkg lock and the download cache's lock, but on Debian
# 12 (apt 2.6) `apt-get update` fails at once on the package lists' lock
# ("Could not get lock /var/lib/apt/lists/lock"), and two apts rebuilding
# /var/cache/apt/*.bin at once can fail a rename: those failures are retried
# every 5 s until TENON_APT_WAIT_S seconds (default 900) have passed.
apt_get() {
  local wait_s=${TENON_APT_WAIT_S:-900}
  local deadline=$((SECONDS + wait_s)) err rc
  err=$(mktemp) || return 1
  while :; do
    rc=0
    $SUDO apt-get -o DPkg::Lock::Timeout="$wait_s" "$@" 2>"$err" || rc=$?
    if [ "$rc" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] &&
       grep -qiE 'could not get lock|unable to lock|unable to acquire|locked by another|problem renaming|rename failed' "$err"; then
      echo "apt-get $*: another package manager holds a lock; retrying in 5 s" >&2
      sleep 5
      continue
    fi
    cat "$err" >&2
    rm -f "$err"
    return "$rc"
  done
}
