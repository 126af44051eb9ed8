#!/bin/sh
# The system packages the tests drive, installed from Debian's packages when
# absent (root, or sudo without a password): headless Chromium and its
# WebDriver (the pipeline-report browser tests) and redis-server (fuzzing
# campaigns sharing findings through Redis start a real server). Used by the
# README's test command and by .ci/run. Elsewhere it names what to install.
set -eu
missing=""
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    missing="$missing chromium chromium-driver"
fi
if ! command -v redis-server >/dev/null 2>&1; then
    missing="$missing redis-server"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo"
else
    echo "the tests need these system packages:$missing" >&2
    echo "install them (Debian/Ubuntu: sudo apt-get install$missing) and run again" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "the tests need:$missing (no apt-get here: install them with your package manager)" >&2
    exit 1
fi
echo "installing the system packages the tests need:$missing" >&2
$sudo apt-get update -qq
# shellcheck disable=SC2086 - the package list is meant to split
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
