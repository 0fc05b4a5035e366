# lib.sh -- sourced by the `loom serve` tests: start a server on a free loopback port, stop it, JSON fields.
# start_server LOG ARGS...: sets srv_pid and url (the server prints the port it got with --port 0).
start_server() {
  local log=$1; shift
  "$bin" serve --host 127.0.0.1 --port 0 -t 1 "$@" 2>"$log" &
  srv_pid=$!
  local i
  for i in $(seq 100); do
    url=$(grep -so 'http://127.0.0.1:[0-9]*' "$log" | head -1)
    if [ -n "$url" ] && curl -s -m 2 "$url/health" | grep -q '"ok"'; then return 0; fi
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: the server did not come up: $(cat "$log")"
  exit 1
}
# stop_server: SIGTERM, then the exit status must be 0 within 10 s.
stop_server() {
  kill -TERM "$srv_pid"
  local i
  for i in $(seq 100); do
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$srv_pid" 2>/dev/null; then
    kill -KILL "$srv_pid"; wait "$srv_pid" 2>/dev/null; srv_pid=
    fail "the server was still running 10 s after SIGTERM"
    return
  fi
  wait "$srv_pid"
  local rc=$?
  srv_pid=
  [ $rc -eq 0 ] || fail "the server exited with $rc after SIGTERM"
}
# json FILE EXPR: prints the JavaScript expression EXPR of the JSON object 'j' read from FILE.
json() {
  node -e 'const fs = require("fs"); const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); const v = eval(process.argv[2]); process.stdout.write(typeof v === "string" ? v : JSON.stringify(v));' "$1" "$2"
}
