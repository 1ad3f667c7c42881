#!/usr/bin/env bash
# Install NVIDIA's nsys CLI (2022.4.2) from Debian's non-free section; safe to run again.
set -euo pipefail

importer_dir=/usr/lib/nsight-systems/host-linux-x64
importer_link=/usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64
sources=/etc/apt/sources.list.d/nsyswrap-non-free.sources
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

if ! command -v nsys >/dev/null 2>&1; then
    if [ ! -f "$sources" ]; then
        # Same mirror as the system's main Debian source (deb822 or one-line format),
        # with the non-free and contrib components added.
        uri=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
        [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
        if [ -z "$uri" ]; then
            echo "install-nsys.sh: no Debian package source is configured in /etc/apt; add one, or install nsys by hand" >&2
            exit 1
        fi
        $sudo tee "$sources" >/dev/null <<SRC
Types: deb
URIs: $uri
Suites: bookworm
Components: non-free contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nsight-systems nsight-systems-target
fi

# Debian hides the QdstrmImporter; without this link nsys leaves .qdstrm instead of .nsys-rep.
if [ -d "$importer_dir" ] && [ ! -e "$importer_link" ]; then
    $sudo mkdir -p "$(dirname "$importer_link")"
    $sudo ln -s "$importer_dir" "$importer_link"
fi

nsys --version
