#!/bin/sh
# Builds the Go client offline: protoc's stubs from proto/, compiled against Debian's grpc-go.
#
# GOPATH mode, because the module proxy is out of reach: the generated package
# goes under build/src at the import path that the M options name, and every
# other import comes from Debian's /usr/share/gocode. GOCACHE sits in build/
# too, so removing build/ is a build from scratch and nothing lands in $HOME.
set -eu
cd "$(dirname "$0")"
rm -rf build/src && mkdir -p build/src
protoc -I ../../proto --go_out=build/src --go-grpc_out=build/src \
  --go_opt=Margwatch/v1/gateway.proto=example.com/agent/argwatchv1 \
  --go-grpc_opt=Margwatch/v1/gateway.proto=example.com/agent/argwatchv1 \
  argwatch/v1/gateway.proto
GO111MODULE=off GOPATH="$PWD/build:/usr/share/gocode" GOCACHE="$PWD/build/cache" go build -o build/check .
