# shellcheck shell=bash
# What every script says the same way: sourced, not run.
#
#   say WORDS   one line on stderr, "<script>: WORDS"
#   die WORDS   say it, exit 1
#
# A script may set ROTA_SAY_AS before sourcing to name itself otherwise.

ROTA_SAY_AS=${ROTA_SAY_AS:-${0##*/}}
say() { echo "$ROTA_SAY_AS: $*" >&2; }
die() { say "$*"; exit 1; }
