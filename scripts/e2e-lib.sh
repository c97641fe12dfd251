# What scripts/e2e-kernel, the real-kernel end-to-end script, uses: the binaries, a kbot-server on SQLite seen
# through kbot's own command line, and a qemu kbot-agent. Sourced, not run.
#
# The caller sets `repo` (the checkout), `work` (the run's directory) and
# defines `log` and `fail`.

# e2e_binaries: sets `bin` (kbot-server, kbot-agent) and `bench` (the static
# x86_64 kbot-bench), built here unless KBOT_E2E_BIN_DIR names them.
e2e_binaries() {
  if [ -n "${KBOT_E2E_BIN_DIR:-}" ]; then
    bin=$KBOT_E2E_BIN_DIR
    log "using kbot-server and kbot-agent from $bin"
  else
    log "building kbot-server, kbot-agent and the static kbot-bench"
    (cd "$repo" && cargo build -q -p kbot-cli -p kbot-agent) >&2
    bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
  fi
  if [ -n "${KBOT_E2E_BIN_DIR:-}" ] && [ -x "$bin/kbot-bench" ]; then
    bench=$bin/kbot-bench  # the agent checks at start that it is static
  else
    bench=$("$repo/scripts/build-kbot-bench-static")
  fi
}

# e2e_free_port: a free TCP port on loopback.
e2e_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# kbot CMD ARGS: one user command of kbot's command line, its answer as JSON.
kbot() { "$bin/kbot-server" "$@" --json; }

# e2e_start_server: a kbot-server on SQLite in $work, on a free port, with a
# user token for `kbot`. Sets `url` and `server_pid`. Extra KBOT_* settings
# (mail, say) are taken from the caller's environment.
e2e_start_server() {
  local port
  port=$(e2e_free_port)
  url="http://127.0.0.1:$port"
  export KBOT_DATABASE_URL="sqlite://$work/kbot.db"
  export KBOT_BIND="127.0.0.1:$port"
  export KBOT_ARTIFACT_DIR="$work/artifacts"
  "$bin/kbot-server" migrate >&2
  export KBOT_SERVER_URL="$url"
  KBOT_TOKEN=$("$bin/kbot-server" user-token --name e2e)
  export KBOT_TOKEN
  "$bin/kbot-server" serve > "$work/server.log" 2>&1 &
  server_pid=$!
  # Up once it answers a command (`repo list` reads the store, as /healthz does).
  for _ in $(seq 1 150); do
    kbot repo list >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited (see $work/server.log)"
    sleep 0.2
  done
  kbot repo list >/dev/null || fail "the server did not answer kbot-server repo list in 30 s"
}

# e2e_start_x86_agent NAME GROUP WORK_DIR CCACHE_DIR LOG ICOUNT_SHIFT [ROLES]:
# an x86_64 qemu kbot-agent (one socket, two cores, a guest of
# KBOT_GUEST_MEMORY_MIB, default 512 MiB) enrolled in tbox group GROUP, with
# KBOT_AGENT_ROLES=ROLES (default build,test). Sets `agent`, its pid.
e2e_start_x86_agent() {
  local token
  mkdir -p "$3"
  rm -f "$3/agent.json"  # a new server: enrol again
  token=$("$bin/kbot-server" enroll-token --label "e2e qemu agent $1" --name "$1")
  KBOT_SERVER_URL="$url" KBOT_ENROLLMENT_TOKEN="$token" KBOT_AGENT_NAME="$1" \
  KBOT_TBOX_GROUP="$2" KBOT_BACKEND=qemu KBOT_WORK_DIR="$3" KBOT_CCACHE_DIR="$4" \
  KBOT_BENCH="$bench" KBOT_BUSYBOX=/bin/busybox KBOT_GUEST_SOCKETS=1 KBOT_GUEST_CORES=2 \
  KBOT_GUEST_MEMORY_MIB="${KBOT_GUEST_MEMORY_MIB:-512}" KBOT_LEASE_WAIT_SECS=10 KBOT_QEMU_ICOUNT_SHIFT="$6" \
  KBOT_AGENT_ROLES="${7:-build,test}" \
    "$bin/kbot-agent" daemon > "$5" 2>&1 &
  agent=$!
}
