#!/usr/bin/env bash
# Builds lockjepsen's container images locally, FROM scratch, out of files
# already installed on this (Debian) machine: nothing is pulled from any
# registry.
#
#   docker/build-image.sh                 # the Redis image (default tag below)
#   docker/build-image.sh --toxiproxy     # also the toxiproxy server image (for docker-compose.yml)
#   docker/build-image.sh --force         # rebuild even if the tag exists
#   docker/build-image.sh --print-tag     # print the Redis image tag and exit
#
# The Redis image holds Debian's redis-server/redis-sentinel/redis-cli, every
# library they link (found with ldd), libfaketime (multithreaded variant) and
# the lockjepsen allocator shim (cluster/fakeclock/shim/shim.c, compiled
# here with cc) that lets jemalloc-linked redis run under libfaketime. Labels
# tell the docker backend where the clock-fault files are:
#   io.lockjepsen.fakeclock.preload   LD_PRELOAD value (shim:libfaketime)
#   io.lockjepsen.inputs              hash of the inputs (a changed input rebuilds)
#
# Idempotent: if the tag exists with the same input hash, nothing is done.
# Concurrent runs wait for each other (flock), then find the images built.
# Environment: LOCKJEPSEN_REDIS_IMAGE (tag, default lockjepsen/redis:7.0.15-debian),
# LOCKJEPSEN_TOXIPROXY_IMAGE (default lockjepsen/toxiproxy:2.5.0), CC.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
image="${LOCKJEPSEN_REDIS_IMAGE:-lockjepsen/redis:7.0.15-debian}"
toxi_image="${LOCKJEPSEN_TOXIPROXY_IMAGE:-lockjepsen/toxiproxy:2.5.0}"
force=0 toxi=0
for arg in "$@"; do
	case "$arg" in
	--force) force=1 ;;
	--toxiproxy) toxi=1 ;;
	--print-tag) echo "$image"; exit 0 ;;
	-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "build-image.sh: unknown argument $arg" >&2; exit 2 ;;
	esac
done

die() { echo "build-image.sh: $*" >&2; exit 1; }

# One build at a time on this machine: scripts/test starts one in the
# background while it vets the code, and the docker tests' own call must
# wait for it and then find the images up to date, rather than build them
# a second time beside it.
if command -v flock >/dev/null; then
	exec 9>"${TMPDIR:-/tmp}/lockjepsen-build-image.lock"
	flock 9
fi

command -v docker >/dev/null || die "the docker CLI is missing (apt-get install docker.io)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
	die "no Docker engine is reachable (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"

# need FILE APT-PACKAGE: fail with the package to install.
need() {
	[ -e "$1" ] || die "$1 is missing: apt-get install $2"
}

redis_bin=/usr/bin/redis-server
sentinel_bin=/usr/bin/redis-sentinel
cli_bin=/usr/bin/redis-cli
faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
shim_src="$root/cluster/fakeclock/shim/shim.c"
need "$redis_bin" redis-server
need "$sentinel_bin" redis-sentinel
need "$cli_bin" redis-tools
need "$faketime_lib" libfaketime
need "$shim_src" "(the lockjepsen source tree; run from a checkout)"
cc="${CC:-cc}"
command -v "$cc" >/dev/null || die "no C compiler ($cc) to build the fakeclock shim: apt-get install gcc"
command -v ldd >/dev/null || die "ldd is missing: apt-get install libc-bin"

# The input hash: package versions, the shim source and the compiler.
pkgver() { dpkg-query -W -f='${Package}=${Version}\n' "$@" 2>/dev/null || true; }
inputs="$( {
	pkgver redis-server redis-sentinel redis-tools libfaketime libc6 libjemalloc2
	sha256sum "$shim_src" "$0" | cut -d' ' -f1
	"$cc" --version | head -1
} | sha256sum | cut -c1-16)"

build_redis() {
	if [ "$force" = 0 ] && have="$(docker image inspect --format '{{index .Config.Labels "io.lockjepsen.inputs"}}' "$image" 2>/dev/null)"; then
		if [ "$have" = "$inputs" ]; then
			echo "build-image.sh: $image is up to date (inputs $inputs)"
			return 0
		fi
		echo "build-image.sh: $image exists with other inputs ($have); rebuilding"
	fi
	local old
	old="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
	local tmp
	tmp="$(mktemp -d "${TMPDIR:-/tmp}/lockjepsen-image.XXXXXX")"
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	local rootfs="$tmp/rootfs"
	mkdir -p "$rootfs"/{usr/bin,usr/lib/lockjepsen,data,faketime,etc,tmp}
	chmod 1777 "$rootfs/tmp"

	# Redis: one binary, the others are names of it (Debian links them).
	local real
	real="$(readlink -f "$redis_bin")"
	cp "$real" "$rootfs/usr/bin/redis-check-rdb"
	ln -s redis-check-rdb "$rootfs/usr/bin/redis-server"
	ln -s redis-check-rdb "$rootfs/usr/bin/redis-sentinel"
	ln -s redis-check-rdb "$rootfs/usr/bin/redis-check-aof"
	cp "$(readlink -f "$cli_bin")" "$rootfs/usr/bin/redis-cli"

	mkdir -p "$rootfs/$(dirname "$faketime_lib")"
	cp "$faketime_lib" "$rootfs/$faketime_lib"

	"$cc" -shared -fPIC -O2 -fno-builtin -fvisibility=hidden -Wall \
		-o "$rootfs/usr/lib/lockjepsen/fakeclock-shim.so" "$shim_src" -ldl ||
		die "compiling the fakeclock shim failed (apt-get install gcc libc6-dev)"

	# Every library the binaries link, at the path ldd resolved it to
	# (the loader included), copied through symlinks.
	local lib
	for lib in $(ldd "$real" "$cli_bin" "$faketime_lib" "$rootfs/usr/lib/lockjepsen/fakeclock-shim.so" |
		awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
		mkdir -p "$rootfs/$(dirname "$lib")"
		cp -L "$lib" "$rootfs/$lib"
	done
	# ldd prints "not found" for a missing library.
	if ldd "$real" "$cli_bin" "$faketime_lib" | grep -q 'not found'; then
		die "a library of redis or libfaketime is missing: $(ldd "$real" "$faketime_lib" | grep 'not found' | head -3)"
	fi

	printf 'root:x:0:0:root:/root:/nonexistent\nredis:x:999:999:redis:/data:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nredis:x:999:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
	printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
	# redis-sentinel needs a writable configuration file to start, and the
	# image has no shell to create one: an empty one is provided (the
	# sentinel services of docker-compose.yml pass their settings as
	# arguments).
	: >"$rootfs/data/sentinel.conf"

	local preload="/usr/lib/lockjepsen/fakeclock-shim.so:$faketime_lib"
	local version
	version="$(dpkg-query -W -f='${Version}' redis-server 2>/dev/null || echo unknown)"
	cat >"$tmp/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/bin
WORKDIR /data
LABEL io.lockjepsen.fakeclock.preload="$preload" \\
      io.lockjepsen.inputs="$inputs" \\
      io.lockjepsen.redis-version="$version" \\
      org.opencontainers.image.description="Debian redis-server $version with libfaketime, built by lockjepsen docker/build-image.sh"
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
EOF
	echo "build-image.sh: building $image (redis-server $version, inputs $inputs)"
	# The legacy builder: no buildx plugin and no registry are needed for
	# a FROM scratch image.
	DOCKER_BUILDKIT=0 docker build -q -t "$image" "$tmp" >/dev/null 2>"$tmp/build.log" ||
		die "docker build failed: $(tail -5 "$tmp/build.log")"
	rm -rf "$tmp"
	trap - EXIT
	docker run --rm --network none "$image" redis-server --version >/dev/null ||
		die "the built image $image does not run redis-server"
	# The previous build, now untagged, is not left behind.
	if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$image")" ]; then
		docker rmi "$old" >/dev/null 2>&1 || true
	fi
	echo "build-image.sh: built $image"
}

build_toxiproxy() {
	if [ "$force" = 0 ] && docker image inspect "$toxi_image" >/dev/null 2>&1; then
		echo "build-image.sh: $toxi_image is present"
		return 0
	fi
	command -v go >/dev/null || die "the toxiproxy image is built from its Go module: install Go"
	local tmp
	tmp="$(mktemp -d "${TMPDIR:-/tmp}/lockjepsen-toxiproxy.XXXXXX")"
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	mkdir -p "$tmp/rootfs/tmp"
	chmod 1777 "$tmp/rootfs/tmp"
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$tmp/rootfs/toxiproxy" github.com/Shopify/toxiproxy/v2/cmd/server) ||
		die "go build of github.com/Shopify/toxiproxy/v2/cmd/server failed (the module is a dependency of lockjepsen's go.mod)"
	cat >"$tmp/Dockerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
EXPOSE 8474
ENTRYPOINT ["/toxiproxy"]
CMD ["-host=0.0.0.0"]
EOF
	DOCKER_BUILDKIT=0 docker build -q -t "$toxi_image" "$tmp" >/dev/null 2>"$tmp/build.log" ||
		die "docker build of $toxi_image failed: $(tail -5 "$tmp/build.log")"
	rm -rf "$tmp"
	trap - EXIT
	echo "build-image.sh: built $toxi_image"
}

build_redis
if [ "$toxi" = 1 ]; then
	build_toxiproxy
fi
