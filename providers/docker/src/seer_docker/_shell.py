"""The bash snippets the Docker machine runs in its container for background processes.

A background process is started with ``setsid`` (so it leads a process group that ``stop`` can
signal as a whole) and recorded in ``/run/seer/procs/<name>.pid`` as ``<pid> <start time>``: the
start time (field 22 of ``/proc/<pid>/stat``) tells the process from a later one that reused its
pid. ``/run/seer`` is a tmpfs, so records never reach a snapshot. Each snippet is run as
``bash -c SNIPPET seer <args...>``.
"""

from __future__ import annotations

#: Where the records (and the secrets file) live in the container: a tmpfs, mode 0700.
RUN_DIR = "/run/seer"
PROCS_DIR = f"{RUN_DIR}/procs"
SECRETS_FILE = f"{RUN_DIR}/secrets.json"

_FUNCS = r"""
starttime() {
    local s
    { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
    s=${s##*) }
    set -- $s
    [ "$1" != Z ] && [ "$1" != X ] || return 1
    echo "${20}"
}
alive() {
    local pid st now
    [ -f "$1" ] || return 1
    read -r pid st < "$1" || return 1
    now=$(starttime "$pid") || return 1
    [ "$now" = "$st" ]
}
"""

#: ``seer <name> <log> argv...``: start argv in the background; print its pid. Exit 17: the name
#: is taken by a running process.
START = (
    _FUNCS
    + r"""
rec="__PROCS__/$1.pid"; log="$2"; shift 2
if alive "$rec"; then echo "a process named this is already running" >&2; exit 17; fi
mkdir -p "$(dirname "$log")" __PROCS__
setsid "$@" >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid $(starttime "$pid")" > "$rec"
echo "$pid"
"""
).replace("__PROCS__", PROCS_DIR)

#: ``seer <name>``: exit 0 if the process runs.
RUNNING = (_FUNCS + '\nalive "__PROCS__/$1.pid"\n').replace("__PROCS__", PROCS_DIR)

#: ``seer <name> <grace seconds>``: TERM the process's group, KILL it after the grace; forget it.
STOP = (
    _FUNCS
    + r"""
rec="__PROCS__/$1.pid"; grace="$2"
[ -f "$rec" ] || exit 0
read -r pid st < "$rec"
if alive "$rec"; then
    kill -TERM -- "-$pid" 2>/dev/null
    end=$((SECONDS + ${grace%.*} + 1))
    while alive "$rec" && [ "$SECONDS" -lt "$end" ]; do sleep 0.05; done
    kill -KILL -- "-$pid" 2>/dev/null
fi
rm -f "$rec"
"""
).replace("__PROCS__", PROCS_DIR)

#: ``seer <variable> <token>``: KILL every process whose environment holds variable=token (the
#: whole tree of a timed-out exec, even what left its process group).
KILL_MARKED = r"""
for d in /proc/[0-9]*; do
    if grep -qzx -- "$1=$2" "$d/environ" 2>/dev/null; then kill -KILL "${d#/proc/}" 2>/dev/null; fi
done
true
"""
