# lib.sh -- sourced by the end-to-end tests that check refused input: their scratch folder, the
# FAIL/ok lines and the one-line-error check.
# e2e_start: $tmp a fresh folder, removed at exit with the process $pid (when set) killed; fails=0.
e2e_start() {
  tmp=$(mktemp -d)
  pid=
  trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
  fails=0
}
# fail WHAT / ok WHAT: a FAIL line (one more in 'fails') / an ok line.
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
# expect_fail WHAT PATTERN COMMAND...: COMMAND (stdin from /dev/null) must exit 1 with exactly one
# line on stderr, matching PATTERN; else a FAIL line (and the first lines of stderr) and one more
# in 'fails'. Its stdout and stderr are left in $tmp/out and $tmp/err.
expect_fail() {
  local what=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$want" "$tmp/err"; then
    echo "FAIL: $what: exit $rc, $lines stderr lines (want '$want'):"; head -5 "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok: $what: $(cat "$tmp/err")"
  fi
}
