#!/usr/bin/env bash
# Prepare this machine for the sandbox tests: bubblewrap, g++, pypy3, a private dockerd and the judge's base image.
#
# Idempotent and fast on re-run: every step is guarded by an "already there" check.
#   - apt packages (bubblewrap docker.io debootstrap g++ pypy3 python3) are installed only when missing;
#   - dockerd is started in the background with its own data root and socket ($AGENTGSPO_DOCKER_HOST,
#     default unix:///run/agentgspo-docker.sock) only when that socket does not answer;
#   - the base image (Debian bookworm minbase + python3 + g++ + pypy3, with a precompiled bits/stdc++.h) is built
#     from a debootstrap rootfs with `docker import` (no registry is reachable) only when absent; the rootfs
#     tarball is cached in $AGENTGSPO_CACHE (default /var/cache/agentgspo), so a wiped data root rebuilds in seconds.
#     The image tag and the tarball's name change with its contents (sandboxes/docker_backend.py DEFAULT_IMAGE),
#     so a machine holding an older image builds the new one.
# Exports nothing: tests find the socket at the default path or through AGENTGSPO_DOCKER_HOST.
set -euo pipefail

SOCK_URL="${AGENTGSPO_DOCKER_HOST:-unix:///run/agentgspo-docker.sock}"
SOCK="${SOCK_URL#unix://}"
DATA_ROOT="${AGENTGSPO_DOCKER_DATA_ROOT:-/var/lib/agentgspo-docker}"
CACHE="${AGENTGSPO_CACHE:-/var/cache/agentgspo}"
IMAGE="${AGENTGSPO_SANDBOX_IMAGE:-agentgspo-sandbox:2}"
ROOTFS_TAR="$CACHE/rootfs-bookworm-py3-gxx-pypy3-v2.tar"
LOG="$CACHE/dockerd.log"

log() { echo "[setup_sandboxes] $*"; }

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v g++ >/dev/null || need+=(g++)
command -v pypy3 >/dev/null || need+=(pypy3)  # the judge's pypy3 language (Kattis' Python 3)
command -v python3 >/dev/null || need+=(python3)
command -v chromium >/dev/null || need+=(chromium)  # headless browser for the eval report's page test
if ((${#need[@]})); then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
mkdir -p "$CACHE"

docker_ok() { DOCKER_HOST="$SOCK_URL" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

EXEC_ROOT=/run/agentgspo-docker-exec
DOCKERD_PID=/run/agentgspo-docker.pid
CONTAINERD_PID="$EXEC_ROOT/containerd/containerd.pid"

# A daemon that ended without cleaning up (the machine restored, the session's processes killed) leaves its pid file
# behind. Once that pid is reused by another process, dockerd believes its containerd "is still running", dials a
# socket nobody serves and gives up ("timeout waiting for containerd to start"). Stop a daemon of ours that is really
# there but does not answer, and drop pid files that name anything else.
clear_stale_daemon() {  # $1: pid file, $2: the process name it should name
    local pidfile=$1 name=$2 pid
    [[ -f "$pidfile" ]] || return 0
    pid="$(tr -dc 0-9 <"$pidfile")"
    if [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]]; then
        log "stopping $name (pid $pid) left from an earlier start: it does not answer"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            [[ -e "/proc/$pid" ]] || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
    elif [[ -n "$pid" ]]; then
        log "removing $pidfile: pid $pid is no longer $name"
    fi
    rm -f "$pidfile"
}

if docker_ok; then
    log "dockerd already answers on $SOCK_URL"
else
    log "starting dockerd on $SOCK_URL (data root $DATA_ROOT, log $LOG)"
    clear_stale_daemon "$DOCKERD_PID" dockerd
    clear_stale_daemon "$CONTAINERD_PID" containerd
    mkdir -p "$DATA_ROOT" "$(dirname "$SOCK")"
    rm -f "$SOCK"
    # No bridge and no iptables: every sandbox container runs with --network none anyway.
    nohup dockerd --data-root "$DATA_ROOT" -H "$SOCK_URL" \
        --exec-root "$EXEC_ROOT" --pidfile "$DOCKERD_PID" \
        --bridge=none --iptables=false --ip-masq=false >"$LOG" 2>&1 </dev/null &
    for _ in $(seq 1 100); do
        docker_ok && break
        sleep 0.2
    done
    if ! docker_ok; then
        log "dockerd did not start; last lines of $LOG:"
        tail -n 20 "$LOG" || true
        exit 1
    fi
    log "dockerd ready"
fi

if DOCKER_HOST="$SOCK_URL" docker image inspect "$IMAGE" >/dev/null 2>&1; then
    log "image $IMAGE already present"
else
    if [[ ! -s "$ROOTFS_TAR" ]]; then
        ROOTFS="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
        log "debootstrap bookworm minbase + python3 g++ pypy3 into $ROOTFS (about a minute)"
        debootstrap --variant=minbase --include=python3,g++,pypy3 bookworm "$ROOTFS" http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -n 20 "$CACHE/debootstrap.log"; exit 1; }
        # Precompiled bits/stdc++.h for the judge's flags (sandboxes/judge/compile.py: CPP_FLAGS).
        mkdir -p "$ROOTFS/opt/agentgspo/pch/bits"
        chroot "$ROOTFS" g++ -std=gnu++17 -O2 -pipe -x c++-header \
            /usr/include/x86_64-linux-gnu/c++/12/bits/stdc++.h -o /opt/agentgspo/pch/bits/stdc++.h.gch
        rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
        tar -C "$ROOTFS" -cf "$ROOTFS_TAR.tmp" .
        mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
        rm -rf "$ROOTFS"
    fi
    log "docker import $ROOTFS_TAR as $IMAGE"
    DOCKER_HOST="$SOCK_URL" docker import "$ROOTFS_TAR" "$IMAGE" >/dev/null
fi
log "ready: DOCKER_HOST=$SOCK_URL image=$IMAGE"
