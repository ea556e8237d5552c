#!/bin/sh
# Migrate once, then serve: the server never races a migration.
set -eu
context-store migrate
exec context-store serve "$@"
