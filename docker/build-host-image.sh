#!/usr/bin/env bash
# Builds the image of a test "host" for the ssh backend's tests, FROM
# scratch out of files installed on this (Debian) machine, as
# build-image.sh does for the Redis image: nothing is pulled from a
# registry. The image runs sshd (openssh-server) in the foreground and has
# a shell and the tools the ssh backend runs on a host: redis-server,
# redis-sentinel, iptables, tc (iproute2), libfaketime with lockjepsen's
# allocator shim, cat/grep/sleep/tail/mkdir/rm/mv; and, for the tests that
# check a cut from a host's side, redis-cli and timeout. Host and client keys
# are not in the image: each test mounts its own at /keys (host_key,
# authorized_keys).
#
#   docker/build-host-image.sh            # build if the inputs changed
#   docker/build-host-image.sh --print-tag
#
# Environment: LOCKJEPSEN_HOST_IMAGE (default lockjepsen/sshhost:debian), CC.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
image="${LOCKJEPSEN_HOST_IMAGE:-lockjepsen/sshhost:debian}"
[ "${1:-}" = "--print-tag" ] && { echo "$image"; exit 0; }
die() { echo "build-host-image.sh: $*" >&2; exit 1; }
need() { [ -e "$1" ] || die "$1 is missing: apt-get install $2"; }

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine is reachable"
faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
shim_src="$root/cluster/fakeclock/shim/shim.c"
need /usr/sbin/sshd openssh-server
need /usr/bin/redis-server redis-server
need /usr/bin/redis-sentinel redis-sentinel
need /usr/sbin/xtables-nft-multi iptables
need /usr/sbin/xtables-legacy-multi iptables
need /sbin/tc iproute2
need "$faketime_lib" libfaketime
need /bin/dash dash
need /usr/bin/redis-cli redis-tools
cc="${CC:-cc}"

pkgver() { dpkg-query -W -f='${Package}=${Version}\n' "$@" 2>/dev/null || true; }
inputs="$( {
	pkgver openssh-server redis-server redis-tools iptables iproute2 libfaketime libc6 dash coreutils grep
	sha256sum "$shim_src" "$0" | cut -d' ' -f1
} | sha256sum | cut -c1-16)"
if have="$(docker image inspect --format '{{index .Config.Labels "io.lockjepsen.inputs"}}' "$image" 2>/dev/null)" && [ "$have" = "$inputs" ]; then
	echo "build-host-image.sh: $image is up to date"
	exit 0
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lockjepsen-host.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
rootfs="$tmp/rootfs"
mkdir -p "$rootfs"/{bin,usr/bin,usr/sbin,sbin,usr/lib/lockjepsen,etc/ssh,run/sshd,root/.ssh,tmp,var/empty,var/lib/lockjepsen,proc,dev}
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/root/.ssh"

bins=(/usr/sbin/sshd /bin/dash /usr/bin/redis-server /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /sbin/tc
	/bin/cat /bin/cp /bin/chmod /bin/grep /bin/sleep /usr/bin/tail /bin/mkdir /bin/rm /bin/mv /bin/ls /usr/bin/head /bin/ps /usr/bin/env
	/usr/bin/redis-cli /usr/bin/timeout)
for b in "${bins[@]}"; do
	real="$(readlink -f "$b")"
	mkdir -p "$rootfs/$(dirname "$b")"
	cp "$real" "$rootfs/$b"
done
ln -s dash "$rootfs/bin/sh"
ln -sf redis-server "$rootfs/usr/bin/redis-sentinel"
for n in iptables iptables-save iptables-restore; do ln -s xtables-nft-multi "$rootfs/usr/sbin/$n"; done
for n in iptables-legacy iptables-legacy-save; do ln -s xtables-legacy-multi "$rootfs/usr/sbin/$n"; done
# iptables' match and target extensions (-p tcp --dport, REJECT).
mkdir -p "$rootfs/usr/lib/x86_64-linux-gnu"
cp -rL /usr/lib/x86_64-linux-gnu/xtables "$rootfs/usr/lib/x86_64-linux-gnu/xtables"
mkdir -p "$rootfs/$(dirname "$faketime_lib")"
cp "$faketime_lib" "$rootfs/$faketime_lib"
"$cc" -shared -fPIC -O2 -fno-builtin -fvisibility=hidden -Wall -o "$rootfs/usr/lib/lockjepsen/fakeclock-shim.so" "$shim_src" -ldl ||
	die "compiling the fakeclock shim failed"
# tc's netem distribution tables.
[ -d /usr/lib/x86_64-linux-gnu/tc ] && cp -r /usr/lib/x86_64-linux-gnu/tc "$rootfs/usr/lib/x86_64-linux-gnu/"

for lib in $(ldd "$rootfs"/usr/sbin/* "$rootfs"/sbin/* "$rootfs"/bin/* "$rootfs"/usr/bin/* "$rootfs"/usr/lib/x86_64-linux-gnu/xtables/*.so \
	"$faketime_lib" "$rootfs/usr/lib/lockjepsen/fakeclock-shim.so" 2>/dev/null |
	awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
	mkdir -p "$rootfs/$(dirname "$lib")"
	cp -L "$lib" "$rootfs/$lib"
done
# NSS modules sshd needs to look up users.
for lib in /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2; do
	[ -e "$lib" ] && mkdir -p "$rootfs/$(dirname "$lib")" && cp -L "$lib" "$rootfs/$lib"
done

printf 'root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n' >"$rootfs/etc/shadow"
chmod 600 "$rootfs/etc/shadow"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
cat >"$rootfs/etc/ssh/sshd_config" <<'CONF'
Port 22
HostKey /etc/ssh/keys/host_key
AuthorizedKeysFile /etc/ssh/keys/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile /run/sshd.pid
CONF
preload="/usr/lib/lockjepsen/fakeclock-shim.so:$faketime_lib"
cat >"$tmp/Dockerfile" <<DF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin
LABEL io.lockjepsen.inputs="$inputs" io.lockjepsen.fakeclock.preload="$preload"
EXPOSE 22
# The keys are mounted at /keys by the test; sshd wants them root-owned, 0600.
CMD ["/bin/sh", "-c", "mkdir -p /etc/ssh/keys && cp /keys/* /etc/ssh/keys/ && chmod 600 /etc/ssh/keys/* && exec /usr/sbin/sshd -D -e"]
DF
echo "build-host-image.sh: building $image"
old="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$tmp" >/dev/null 2>"$tmp/build.log" || die "docker build failed: $(tail -5 "$tmp/build.log")"
# The previous build, now untagged, is not left behind.
if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$image")" ]; then
	docker rmi "$old" >/dev/null 2>&1 || true
fi
echo "build-host-image.sh: built $image"
