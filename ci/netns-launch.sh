#!/bin/sh
# The remote shell of ci/multihost.sh's cluster. Host 10.77.0.I+1 is network namespace
# matchshim-hI; a process entering it also gets its own host name (matchshim-hI) and System V
# IPC, as on a separate machine (Open MPI names its session directory after the host, and
# UCX shares memory only within one IPC namespace).
#   netns-launch.sh [-x] HOST COMMAND...    as MPI launchers call ssh: COMMAND runs through sh
#   netns-launch.sh --exec HOST PROGRAM [ARGS...]   runs PROGRAM with its arguments as given
exec_args=0
while [ $# -gt 0 ]; do
    case "$1" in
        -x) shift ;; # hydra's "no X11 forwarding"
        --exec) exec_args=1; shift ;;
        *) break ;;
    esac
done
host=${1:?usage: netns-launch.sh [-x] HOST COMMAND... | --exec HOST PROGRAM [ARGS...]}
shift
case "$host" in
    10.77.0.[1-4]) name=matchshim-h$((${host##*.} - 1)) ;;
    *) echo "netns-launch.sh: $host is not a host of the test cluster (10.77.0.1-4)" >&2; exit 255 ;;
esac
if [ "$exec_args" = 1 ]; then
    exec ip netns exec "$name" unshare --uts --ipc sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
fi
exec ip netns exec "$name" unshare --uts --ipc sh -c "hostname $name && $*"
