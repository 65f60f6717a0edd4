#!/bin/sh
# Builds the Java client offline: protoc's stubs from proto/, compiled against Debian's grpc-java.
#
# No Maven or Gradle, because Maven Central is out of reach: javac and jar on
# the jars in /usr/share/java, named one by one so that nothing else installed
# there can shadow a class.
set -eu
cd "$(dirname "$0")"
J=/usr/share/java
rm -rf build && mkdir -p build/src build/classes
protoc -I ../../proto --java_out=build/src \
  --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin --grpc-java_out=build/src \
  argwatch/v1/gateway.proto
# geronimo-annotation at compile time only: grpc-java 1.41's plugin always writes
# @javax.annotation.Generated, which the JDK dropped in 11; nothing reads it at run time.
CP=$J/grpc-api.jar:$J/grpc-stub.jar:$J/grpc-protobuf.jar:$J/protobuf.jar:$J/guava.jar:$J/gson.jar
javac -encoding UTF-8 -d build/classes -cp "$CP:$J/geronimo-annotation-1.3-spec.jar" \
  Check.java build/src/argwatch/v1/*.java
# Run time: Debian's libgrpc-java declares none of netty, gson or perfmark, which grpc-netty and
# grpc-core load, so the jar's manifest names every jar (grpc-netty's own dependencies included).
# Manifest lines are short: one jar per continuation line (the first space joins the line on, the
# second separates the jars).
{
  echo "Class-Path: $J/grpc-api.jar"
  for jar in grpc-context grpc-core grpc-netty grpc-protobuf grpc-protobuf-lite grpc-stub \
    protobuf guava gson perfmark-api netty-buffer netty-codec netty-codec-http netty-codec-http2 \
    netty-codec-socks netty-common netty-handler netty-handler-proxy netty-resolver netty-transport; do
    echo "  $J/$jar.jar"
  done
} >build/manifest.txt
jar --create --file build/check.jar --main-class Check --manifest build/manifest.txt -C build/classes .
