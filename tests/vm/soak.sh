#!/bin/sh
# tests/vm/soak.sh SECONDS -- the system-wide service (`ptb daemon`) under churn, in the VM
# guest (busybox sh, root). Called from guest-tests.sh when the kernel command line sets
# SOAK_S (tests/vm/run.sh does so for one kernel).
#
# For SECONDS of guest time, test programs (ptb-testapp, copied under three names that three
# rules select, each rule with its own policy: fixed, interleave, ptb) start and exit at
# random, with checksums. Canaries the rules leave out run pinned to CPU 1: small programs of
# a selected name (too few threads), and processes started on purpose until one gets the pid
# of a program the daemon managed and let go (pid_max is lowered so pids come round again).
# Checks: the daemon never panics; its resident memory stays within a bound; every program's
# checksums are intact; no canary's affinity ever changes and none is ever listed by
# `ptb status`; on SIGTERM the daemon puts back the affinity of every thread it pinned and
# exits 0. Prints `VMTEST PASS|FAIL soak...` lines; exits with the number of failures.
S=${1:-300}
export PATH=/bin
bad=0
up() { cut -d' ' -f1 /proc/uptime; }
now() { cut -d. -f1 /proc/uptime; }
pass() { echo "VMTEST PASS [$(up)s] $*"; }
fail() { echo "VMTEST FAIL [$(up)s] $*"; bad=$((bad + 1)); }
D=/tmp/soak
rm -rf $D && mkdir -p $D
ALL=$(cat /sys/devices/system/cpu/online)
RSS_GROWTH_KB=8192    # the bound: resident memory may grow at most 8 MiB after the first minute
RSS_MAX_KB=49152      # and never exceed 48 MiB
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up   # the metrics endpoint is on loopback
for k in pin mix ptb; do cp /bin/ptb-testapp $D/soak-$k; done
cat > $D/ptb.toml <<EOF
[daemon]
scan_ms = 500
source = "page-faults"
metrics_addr = "127.0.0.1:9464"
max_programs = 6

[[rule]]
name = "pinned"
command = ["soak-pin"]
min_threads = 3
policy = "fixed"

[[rule]]
name = "spread"
command = ["soak-mix"]
min_threads = 3
policy = "interleave"

[[rule]]
name = "placed"
command = ["soak-ptb"]
min_threads = 3
policy = "ptb"
EOF
if ! ptb daemon --check --config $D/ptb.toml > $D/check.out 2>&1; then
  cat $D/check.out; fail "soak: the config was refused"; exit $bad
fi
old_pid_max=$(cat /proc/sys/kernel/pid_max)
echo 512 > /proc/sys/kernel/pid_max
ptb daemon --config $D/ptb.toml 2> $D/daemon.err & DPID=$!

# The affinity of every thread of a process, one line.
aff() { for s in /proc/$1/task/*/status; do awk '/Cpus_allowed_list/{print $2}' $s 2>/dev/null; done | sort -u | tr '\n' ' '; }
# State letter and start time of a process ("" when gone). The shell reaps background
# children whenever it waits for a foreground command, so a pid may name another process by
# the time it is checked: every process here is tracked as pid:starttime.
state() { cut -d')' -f2 /proc/$1/stat 2>/dev/null | awk '{print $1}'; }
start_of() { cut -d')' -f2 /proc/$1/stat 2>/dev/null | awk '{print $20}'; }
# True while pid $1 is the process that started at $2 and has not exited.
same() { [ "$(start_of $1)" = "$2" ] && [ "$(state $1)" != Z ]; }

APPS=""; CANARIES=""; n=0; started=0; ok=0; failed_apps=0; canaries=0; touched=0; reused=0; chases=0
rss_first=""; rss_max=0; t_end=$(( $(now) + S )); t_rss=0; t_start=$(now)

start_app() {
  n=$((n + 1)); kind=$(shuf -n1 -e pin mix ptb); th=$(shuf -i 2-3 -n1); mb=$(shuf -i 4-12 -n1); s=$(shuf -i 3-12 -n1)
  extra=""; [ $kind = ptb ] && extra="--partition --refault-ms 100 --refault-parts 4"
  $D/soak-$kind --threads $th --mb $mb --seconds $s $extra > $D/app.$n.out 2>&1 &
  p=$!; APPS="$APPS $p:$n:$(start_of $p)"; started=$((started + 1))
}
start_canary() {  # a selected name, but 2 threads (< min_threads), pinned to CPU 1
  n=$((n + 1))
  taskset -c 1 $D/soak-pin --threads 1 --mb 2 --seconds $(shuf -i 2-8 -n1) > $D/canary.$n.out 2>&1 &
  p=$!; CANARIES="$CANARIES $p:$(start_of $p)"; canaries=$((canaries + 1))
}
# Start processes pinned to CPU 1 until one gets pid $1 (a pid the daemon managed and let go).
chase() {
  i=0; chases=$((chases + 1))
  while [ $i -lt 400 ]; do
    taskset -c 1 sleep 15 & c=$!
    if [ "$c" = "$1" ]; then
      CANARIES="$CANARIES $c:$(start_of $c)"; canaries=$((canaries + 1)); reused=$((reused + 1)); return 0
    fi
    kill $c 2>/dev/null; wait $c 2>/dev/null
    i=$((i + 1))
  done
  return 1
}
reap_apps() {
  left=""
  for e in $APPS; do
    p=${e%%:*}; k=${e#*:}; t=${k#*:}; k=${k%%:*}
    if ! same $p $t; then
      wait $p; rc=$?   # the shell keeps the status of a job it reaped early
      if [ $rc = 0 ] && grep -q 'checksum=ok' $D/app.$k.out; then ok=$((ok + 1))
      else failed_apps=$((failed_apps + 1)); echo "app $k (pid $p) rc=$rc:"; tail -3 $D/app.$k.out; fi
    else left="$left $e"; fi
  done
  APPS=$left
}
check_canaries() {
  left=""
  for e in $CANARIES; do
    p=${e%:*}; t=${e#*:}
    if ! same $p $t; then wait $p 2>/dev/null; continue; fi
    a=$(aff $p)
    # Read again after the affinities: the canary may have exited (and its pid been reused)
    # while they were read.
    if [ "$a" != "1 " ] && same $p $t; then touched=$((touched + 1)); echo "canary $p: affinity [$a], was [1]"; fi
    left="$left $e"
  done
  CANARIES=$left
}

while [ $(now) -lt $t_end ]; do
  reap_apps
  check_canaries
  napps=$(echo $APPS | wc -w)
  [ $napps -lt 4 ] && [ $(shuf -i 0-2 -n1) != 0 ] && start_app
  [ $(shuf -i 0-5 -n1) = 0 ] && start_canary
  # Now and then, put a canary on a pid the daemon let go of.
  if [ $(shuf -i 0-9 -n1) = 0 ]; then
    p=$(grep 'let go of pid' $D/daemon.err | awk '{print $NF}' | shuf -n1)
    # pids come round from 301 (RESERVED_PIDS) after pid_max
    if [ -n "$p" ] && [ "$p" -gt 300 ] && [ ! -e /proc/$p ]; then chase $p; fi
  fi
  # Canaries are never listed as managed.
  st=$(ptb status --json 2>/dev/null)
  for e in $CANARIES; do
    p=${e%:*}
    if echo "$st" | grep -q "\"pid\": $p," && same $p ${e#*:}; then touched=$((touched + 1)); echo "canary $p is managed"; fi
  done
  if [ $(( $(now) - t_rss )) -ge 10 ]; then
    t_rss=$(now); r=$(awk '/VmRSS/{print $2}' /proc/$DPID/status 2>/dev/null)
    [ -n "$r" ] && [ "$r" -gt $rss_max ] && rss_max=$r
    [ -z "$rss_first" ] && [ $(( $(now) - t_start )) -ge 60 ] && rss_first=$r
    echo "soak: t=$(( $(now) - t_start ))s apps=$started ok=$ok running=$(echo $APPS | wc -w) managed=$(grep -c 'taking pid' $D/daemon.err) canaries=$canaries reused=$reused daemon_rss=${r}kB"
  fi
  sleep 0.5
done
rss_last=$(awk '/VmRSS/{print $2}' /proc/$DPID/status 2>/dev/null)
wget -q -O $D/metrics http://127.0.0.1:9464/metrics || echo "soak: wget of /metrics failed"
metrics=$(grep -c '^ptb_' $D/metrics)
grep -E '^ptb_daemon_(programs|attached_total|rss_bytes)' $D/metrics

# Clean shutdown: pinned programs still running get their affinity back.
for i in 1 2; do
  n=$((n + 1)); $D/soak-pin --threads 3 --mb 4 --seconds 25 > $D/app.$n.out 2>&1 &
  p=$!; FINAL="$FINAL $p:$n:$(start_of $p)"
done
i=0; pinned=0
while [ $i -lt 100 ] && [ $pinned -lt 2 ]; do
  pinned=0
  for e in $FINAL; do p=${e%%:*}; a=$(aff $p); [ -n "$a" ] && [ "$a" != "$ALL " ] && pinned=$((pinned + 1)); done
  sleep 0.2; i=$((i + 1))
done
kill -TERM $DPID; wait $DPID; drc=$?
sleep 0.3
restored=0
for e in $FINAL; do p=${e%%:*}; a=$(aff $p); [ "$a" = "$ALL " ] && restored=$((restored + 1)) || echo "pid $p after SIGTERM: [$a], want [$ALL]"; done
APPS="$APPS $FINAL"
while [ -n "$(echo $APPS)" ]; do reap_apps; check_canaries; sleep 0.5; done
for e in $CANARIES; do p=${e%:*}; same $p ${e#*:} && kill $p 2>/dev/null; wait $p 2>/dev/null; done
echo $old_pid_max > /proc/sys/kernel/pid_max
tail -5 $D/daemon.err
managed=$(grep -c 'taking pid' $D/daemon.err); let_go=$(grep -c 'let go of pid' $D/daemon.err)
dur=$(( t_end - t_start ))
echo "soak: ${dur}s, $started programs ($ok checksums ok, $failed_apps failed), $managed taken and $let_go let go by the daemon, $canaries canaries ($reused on reused pids after $chases chases), daemon RSS ${rss_first:-?} kB at 60 s, max $rss_max kB, last $rss_last kB, $metrics metric lines"

grep -q panicked $D/daemon.err && fail "soak: the daemon panicked"
[ $drc = 0 ] || fail "soak: the daemon exited $drc on SIGTERM"
[ $failed_apps = 0 ] && [ $ok -gt 0 ] || fail "soak: $failed_apps programs failed their checksums or exit status"
[ $touched = 0 ] || fail "soak: $touched canary checks found a touched process"
[ $reused -gt 0 ] || fail "soak: no canary got a pid the daemon had managed (the reuse case was not exercised)"
[ $managed -ge 10 ] || fail "soak: the daemon took only $managed programs"
[ $restored = 2 ] && [ $pinned = 2 ] || fail "soak: after SIGTERM $restored of 2 pinned programs had their affinity back (pinned: $pinned)"
[ -n "$rss_first" ] && [ $rss_max -le $RSS_MAX_KB ] && [ $rss_last -le $((rss_first + RSS_GROWTH_KB)) ] ||
  fail "soak: daemon RSS ${rss_first:-?} kB at 60 s, max $rss_max kB, last $rss_last kB (bound: +$RSS_GROWTH_KB kB, max $RSS_MAX_KB kB)"
[ $metrics -gt 0 ] || fail "soak: no metrics"
[ $bad = 0 ] && pass "soak: ${dur}s of programs starting and exiting under ptb daemon: $ok checksums ok, $managed taken, $let_go let go, $reused reused pids never touched, daemon RSS max $rss_max kB (at 60 s ${rss_first} kB, last $rss_last kB), affinities back after SIGTERM"
exit $bad
