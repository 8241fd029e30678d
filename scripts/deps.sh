#!/usr/bin/env bash
# Installs what building and testing Cairn needs on a fresh Debian machine:
# a C compiler for the cgo PostgreSQL parser, psql (cmd/cairn's TLS test
# checks libpq's sslmode=verify-full and client certificates with it), curl,
# and the Go modules.
set -euo pipefail
if ! command -v gcc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq gcc libc6-dev >/dev/null
  else
    echo "deps: gcc is required (cgo builds the PostgreSQL parser)" >&2
    exit 1
  fi
fi
if ! command -v psql >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
  else
    echo "deps: psql is required (apt-get install postgresql-client)" >&2
    exit 1
  fi
fi
# cmd/cairn's TestOperationsGuide runs docs/operations.md, which scrapes
# /metrics with curl.
if ! command -v curl >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq curl >/dev/null
  else
    echo "deps: curl is required (apt-get install curl)" >&2
    exit 1
  fi
fi
go mod download
