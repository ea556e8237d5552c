#!/bin/sh
# `serve` (the default command) migrates once, then serves: the server never races a migration
# and several replicas never run one each inside their workers. Any other command is passed to
# the `context-store` command line (`keys create --tenant acme`, `migrate`, ...).
set -eu
if [ "$#" -eq 0 ] || [ "$1" = serve ]; then
    context-store migrate
    exec context-store serve
fi
exec context-store "$@"
