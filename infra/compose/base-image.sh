#!/usr/bin/env bash
# Builds the base image cloudburst-base:bookworm from Debian packages alone, for machines that reach Debian's mirror but no
# image registry: debootstrap a Debian 12 root filesystem with Python 3.11 (what python:3.11-slim-bookworm gives the
# Dockerfile) and import it. Elsewhere the Dockerfile's default FROM python:3.11-slim-bookworm is the one to use.
#   infra/compose/base-image.sh              # ~3 min; then: docker build --build-arg BASE_IMAGE=cloudburst-base:bookworm .
# Needs root, debootstrap and a running Docker engine. DOCKER names the client (default: docker).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
image="${CLOUDBURST_BASE_IMAGE:-cloudburst-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$repo_root/var/compose/base-rootfs"
docker="${DOCKER:-docker}"
# Certificate authorities this machine trusts besides Debian's (a TLS-inspecting proxy's, say): pip and Maven in the
# image build go out through the same network and must trust them too. Debian's place for them; empty: none.
extra_ca_dir="${CLOUDBURST_EXTRA_CA_DIR-/usr/local/share/ca-certificates}"

log() { printf '[base-image %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

[ "$(id -u)" -eq 0 ] || { echo "base-image.sh: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "base-image.sh: install Debian's debootstrap first" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
log "debootstrapping Debian 12 (bookworm, minbase) into $work from $mirror"
# python3-venv + python3-pip: infra/setup.sh creates venvs with python3.11 -m venv; python3.11-dev: Python.h for the
# wheels pip compiles (Horovod, gssapi, krb5; python:3.11-slim has the headers too); ca-certificates: pip and curl over TLS.
debootstrap --variant=minbase --include=python3.11,python3.11-dev,python3-venv,python3-pip,ca-certificates \
  bookworm "$work" "$mirror"

# Apt sources as Debian's own images write them (deb822, main only: infra/setup.sh adds contrib and non-free), with
# updates and security so the image gets the same package versions as a current bookworm host.
rm -f "$work/etc/apt/sources.list"
cat > "$work/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
if [ -n "$extra_ca_dir" ] && compgen -G "$extra_ca_dir/*.crt" >/dev/null; then
  log "adding this machine's extra certificate authorities ($extra_ca_dir: $(cd "$extra_ca_dir" && echo *.crt))"
  cp "$extra_ca_dir"/*.crt "$work/usr/local/share/ca-certificates/"
  chroot "$work" update-ca-certificates
fi
# Images keep no package lists or caches; services never start inside a build.
rm -rf "$work"/var/lib/apt/lists/* "$work"/var/cache/apt/*.bin "$work"/var/cache/apt/archives/*.deb
printf '#!/bin/sh\nexit 101\n' > "$work/usr/sbin/policy-rc.d"
chmod +x "$work/usr/sbin/policy-rc.d"

log "importing as $image"
tar -C "$work" --numeric-owner -c . \
  | "$docker" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' - "$image"
rm -rf "$work"
log "done: $("$docker" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
