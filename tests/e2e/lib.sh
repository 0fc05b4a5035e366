# lib.sh -- sourced by the end-to-end tests that check refused input: the one-line-error check.
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
